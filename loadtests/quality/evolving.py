"""Facts that change over time (issue 30, first row): does search return the version of a subject's
fact that the question asks for, not another subject's newer memory?

    HF_HUB_OFFLINE=1 PYTHONPATH=services .venv/bin/python loadtests/quality/evolving.py [--seed 30]
        [--subjects 60] [--extra JSON] [--out PATH] [--ab | --base URL --key KEY]

Generated, deterministic for a seed: people, teams and projects, each with one or two facts that
change three or four times over the years (a person moves city and changes employer, a team changes
its deploy tool and its database, a project its lead and its hosting). Every version is a memory
of its own with its own ``valid_from`` and no shared ``key``, worded differently each time; each
subject also has a fact that never changes. Every other subject is a distractor: the same kind of
fact about someone else, often newer.

Questions, each phrased many ways:

- ``newest``: "now", "currently", "these days", "at the moment", "as things stand", "still" ... ->
  the latest version of that subject's fact;
- ``oldest``: "originally", "at first", "in the beginning", "used to", "initially" ... -> the first;
- ``as-of``: "as of March 2021", "as of 2021-03-04" -> the version in force then (a date well
  inside one version's time);
- ``in-period``: "in 2019", "back in 2017", "during 2020", "in May 2018" -> the same, never a
  year in which the fact changed. Other memories are dated in the period (another subject's, the
  subject's other facts): search must not read the question as what happened then (LoCoMo's event
  questions do need that reading when the subject's own versions are dated in it);
- ``before/after``: "before moving to Lisbon", "after switching away from Jenkins" -> the version
  just before or after the one the event names;
- ``no-cue``: the subject's unchanging fact, asked plainly (a change to time cues must leave these
  as they were).

Scores recall@1 (the expected memory first) per kind, and recall@5. Through the facade on the
embedded PostgreSQL and the local MiniLM (the harness LoCoMo uses), or with ``--base URL --key
KEY`` over REST against a deployed server (a namespace of its own, created if missing). ``--ab``
(in-process only) also asks every question as search did before the timeline (time cues scored
over every candidate), alternating the two, and prints both tables and their latencies: the
baseline and the change in one run. Writes JSON (default
loadtests/quality/results/evolving-<date>.json, not committed) and prints the tables.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # loadtests/: the shared harness

RESULTS = Path(__file__).resolve().parent / "results"
KINDS = ("newest", "oldest", "as-of", "in-period", "before/after", "no-cue")
REFERENCE = datetime(2026, 6, 1, tzinfo=UTC)

FIRST = [
    "Alice",
    "Amara",
    "Bruno",
    "Carmen",
    "Dmitri",
    "Elena",
    "Farid",
    "Greta",
    "Hiro",
    "Ines",
    "Jonas",
    "Kavya",
    "Liam",
    "Marta",
    "Nadia",
    "Oscar",
    "Priya",
    "Quentin",
    "Rosa",
    "Samir",
    "Tomas",
    "Ulla",
    "Viktor",
    "Wen",
    "Yusuf",
    "Zofia",
    "Anders",
    "Beatriz",
    "Chidi",
    "Dalia",
    "Emeka",
    "Fatima",
    "Goran",
    "Hana",
    "Ivan",
    "Julia",
    "Kenji",
    "Leila",
    "Mateo",
    "Noor",
]
LAST = [
    "Okafor",
    "Lindqvist",
    "Moreau",
    "Tanaka",
    "Novak",
    "Haddad",
    "Ferreira",
    "Kowalski",
    "Brennan",
    "Achebe",
    "Sorensen",
    "Ivanova",
    "Castillo",
    "Nakamura",
    "Petrov",
    "Oyelaran",
    "Duarte",
    "Fischer",
    "Gallagher",
    "Rahman",
    "Holm",
    "Vasquez",
    "Mbeki",
    "Larsen",
    "Costa",
]
TEAMS = [
    "Falcon",
    "Harbor",
    "Kestrel",
    "Juniper",
    "Cobalt",
    "Meridian",
    "Lantern",
    "Quartz",
    "Sable",
    "Tundra",
    "Willow",
    "Ember",
    "Atlas",
    "Nimbus",
    "Orchid",
    "Pioneer",
    "Raven",
    "Summit",
    "Vortex",
    "Zephyr",
]
PROJECTS = [
    "Orion",
    "Bluebird",
    "Cascade",
    "Driftwood",
    "Everest",
    "Foxglove",
    "Granite",
    "Helix",
    "Iris",
    "Jasper",
    "Keystone",
    "Lighthouse",
    "Mosaic",
    "Nebula",
    "Obsidian",
    "Paragon",
    "Redwood",
    "Sequoia",
    "Trident",
    "Umbra",
]

CITIES = [
    "Lisbon",
    "Berlin",
    "Toronto",
    "Nairobi",
    "Osaka",
    "Melbourne",
    "Oslo",
    "Denver",
    "Porto",
    "Krakow",
    "Dublin",
    "Seoul",
    "Lyon",
    "Austin",
    "Tallinn",
    "Montreal",
    "Valencia",
    "Helsinki",
    "Cape Town",
    "Edinburgh",
]
EMPLOYERS = [
    "Acme Robotics",
    "Globex",
    "Initech",
    "Umbrella Health",
    "Stark Logistics",
    "Wayne Analytics",
    "Hooli",
    "Vandelay Imports",
    "Soylent Foods",
    "Tyrell Systems",
    "Cyberdyne Labs",
    "Massive Dynamic",
    "Aperture Science",
    "Black Mesa Energy",
]
DEPLOY = [
    "Jenkins",
    "Spinnaker",
    "ArgoCD",
    "Flux",
    "GitHub Actions",
    "GitLab CI",
    "Octopus Deploy",
    "Harness",
    "Bamboo",
    "Travis CI",
]
DATABASES = [
    "PostgreSQL",
    "MySQL",
    "MongoDB",
    "Cassandra",
    "DynamoDB",
    "CockroachDB",
    "Redis",
    "Oracle",
    "SQL Server",
    "Couchbase",
]
HOSTS = [
    "AWS",
    "Google Cloud",
    "Azure",
    "Hetzner",
    "DigitalOcean",
    "Fly.io",
    "Heroku",
    "OVHcloud",
    "Linode",
    "Cloudflare",
]
STATIC_PERSON = [
    ("plays the {v}", "What instrument does {s} play?", "cello|banjo|trumpet|harp|oboe|drums|violin|flute"),
    ("is allergic to {v}", "What is {s} allergic to?", "peanuts|shellfish|pollen|penicillin|cats|latex"),
    ("has a dog called {v}", "What is the name of {s}'s dog?", "Biscuit|Pepper|Mochi|Rufus|Juno|Waffles|Ziggy"),
]
STATIC_TEAM = [
    ("holds its retro on {v}", "When does {s} hold its retro?", "Mondays|Tuesdays|Thursdays|Fridays"),
    ("mascot is a {v}", "What is the mascot of {s}?", "otter|heron|badger|lynx|walrus|gecko"),
]
STATIC_PROJECT = [
    ("codename in the roadmap is {v}", "What is the roadmap codename of {s}?", "Tulip|Anvil|Comet|Pebble|Saffron"),
    ("budget owner sits in {v}", "Which department owns the budget of {s}?", "finance|marketing|research|sales"),
]


@dataclass(frozen=True)
class Attribute:
    """A fact that changes: how each version is worded, how the questions ask about it."""

    name: str
    values: list[str]
    # Version wordings: the first version, then later ones (changes). {s} subject, {v} value, {p} previous.
    first: list[str]
    change: list[str]
    # Questions: {s} subject; {v} the value an event names.
    newest: list[str]
    oldest: list[str]
    as_of: list[str]  # {when}: "in 2019", "as of March 2021", ...
    before: list[str]
    after: list[str]


CITY = Attribute(
    "city",
    CITIES,
    first=["{s} lives in {v}.", "{s} is based in {v}.", "{s} has an apartment in {v} and lives there."],
    change=[
        "{s} moved from {p} to {v}.",
        "{s} relocated to {v}.",
        "{s} left {p} and now lives in {v}.",
        "{s} has settled in {v} after the move.",
    ],
    newest=[
        "Where does {s} live now?",
        "Which city is {s} currently based in?",
        "Where does {s} live these days?",
        "Where is {s} living at the moment?",
        "As things stand, where does {s} live?",
        "Where did {s} most recently move to?",
        "Which city does {s} live in nowadays?",
        "What is {s}'s latest city?",
        "Where is {s} based right now?",
        "Where does {s} live at present?",
        "Where has {s} ended up living?",
        "What is {s}'s current city?",
    ],
    oldest=[
        "Where did {s} originally live?",
        "Where did {s} live at first?",
        "In the beginning, where was {s} based?",
        "Which city did {s} use to live in?",
        "Where did {s} initially live?",
        "What was {s}'s first city?",
        "Where did {s} live before all the moves?",
        "Where was {s} living back then, at the start?",
        "Where did {s} start out living?",
        "Which city was {s}'s earliest home?",
    ],
    as_of=["Where did {s} live {when}?", "Which city was {s} based in {when}?", "{When}, where was {s} living?"],
    before=["Where did {s} live before moving to {v}?", "Before {s} relocated to {v}, which city was home?"],
    after=["Where did {s} move after {v}?", "After leaving {v}, where did {s} go to live?"],
)
EMPLOYER = Attribute(
    "employer",
    EMPLOYERS,
    first=["{s} works at {v}.", "{s} took a job at {v}.", "{s} is employed by {v}."],
    change=[
        "{s} left {p} and joined {v}.",
        "{s} changed jobs and now works for {v}.",
        "{s} accepted an offer from {v}.",
        "{s} was hired by {v}.",
    ],
    newest=[
        "Where does {s} work now?",
        "Who is {s}'s current employer?",
        "Which company is {s} working for these days?",
        "Where is {s} employed at the moment?",
        "Who does {s} work for nowadays?",
        "What is {s}'s latest job?",
        "As it stands, which company employs {s}?",
        "Where did {s} most recently get hired?",
    ],
    oldest=[
        "Where did {s} originally work?",
        "Which company did {s} work for at first?",
        "Who was {s}'s first employer?",
        "Where did {s} used to work in the beginning?",
        "Initially, which company employed {s}?",
        "Where did {s} start their career?",
    ],
    as_of=["Where did {s} work {when}?", "Which company employed {s} {when}?", "{When}, who was {s} working for?"],
    before=["Where did {s} work before joining {v}?", "Before {s} was hired by {v}, which company were they at?"],
    after=["Where did {s} go after {v}?", "After leaving {v}, which company did {s} join?"],
)
DEPLOY_TOOL = Attribute(
    "deploy tool",
    DEPLOY,
    first=["{s} deploys with {v}.", "{s} ships its releases through {v}.", "{s} set up {v} for deployments."],
    change=[
        "{s} switched its deploys from {p} to {v}.",
        "{s} migrated the deployment pipeline to {v}.",
        "{s} replaced {p} with {v} for releases.",
        "{s} now rolls out releases with {v}.",
    ],
    newest=[
        "Which deploy tool does {s} use now?",
        "What does {s} currently deploy with?",
        "How does {s} ship releases these days?",
        "What is {s}'s deployment tool at the moment?",
        "Which tool does {s} deploy with today?",
        "What is the latest deploy tool of {s}?",
        "Does {s} still deploy with the same tool, and which one is it?",
        "What deployment pipeline is {s} on as of now?",
    ],
    oldest=[
        "What did {s} originally deploy with?",
        "Which deploy tool did {s} use at first?",
        "What was {s}'s first deployment tool?",
        "In the beginning, how did {s} ship releases?",
        "What deploy tool did {s} use initially?",
        "What did {s} use for deployments before the change?",
    ],
    as_of=["Which deploy tool did {s} use {when}?", "What did {s} deploy with {when}?", "{When}, how did {s} ship?"],
    before=["What did {s} deploy with before switching to {v}?", "Before {s} moved to {v}, what was the deploy tool?"],
    after=["What did {s} adopt for deploys after {v}?", "After dropping {v}, which deploy tool did {s} pick?"],
)
DATABASE = Attribute(
    "database",
    DATABASES,
    first=["{s} stores its data in {v}.", "{s} runs on a {v} database.", "{s} picked {v} as its database."],
    change=[
        "{s} moved its data from {p} to {v}.",
        "{s} migrated the database to {v}.",
        "{s} replaced {p} with {v} as the main database.",
    ],
    newest=[
        "Which database does {s} use now?",
        "What database is {s} currently running?",
        "Which database is {s} on these days?",
        "What is {s}'s database at the moment?",
        "What is the most recent database {s} moved to?",
        "Which database does {s} rely on nowadays?",
    ],
    oldest=[
        "Which database did {s} originally use?",
        "What database did {s} start with?",
        "What was {s}'s first database?",
        "Initially, which database did {s} run on?",
        "Which database did {s} use in the beginning?",
    ],
    as_of=["Which database did {s} use {when}?", "What database was {s} running {when}?"],
    before=["Which database did {s} use before migrating to {v}?", "Before moving to {v}, what database did {s} run?"],
    after=["Which database did {s} adopt after {v}?", "After {v}, what database did {s} migrate to?"],
)
HOSTING = Attribute(
    "hosting",
    HOSTS,
    first=["{s} is hosted on {v}.", "{s} runs in {v}.", "{s} launched on {v}."],
    change=[
        "{s} moved its hosting from {p} to {v}.",
        "{s} migrated to {v}.",
        "{s} left {p} for {v}.",
    ],
    newest=[
        "Where is {s} hosted now?",
        "Which cloud does {s} currently run on?",
        "Where does {s} run these days?",
        "What is {s}'s hosting at the moment?",
        "Where is {s} hosted as things stand?",
        "Which provider hosts {s} nowadays?",
    ],
    oldest=[
        "Where was {s} originally hosted?",
        "Which cloud did {s} first run on?",
        "Where did {s} launch initially?",
        "Where was {s} hosted at the start?",
        "Which provider did {s} use in the beginning?",
    ],
    as_of=["Where was {s} hosted {when}?", "Which cloud did {s} run on {when}?"],
    before=["Where was {s} hosted before it moved to {v}?", "Before migrating to {v}, where did {s} run?"],
    after=["Where did {s} move after {v}?", "After leaving {v}, which provider hosted {s}?"],
)
MONTH_NAMES = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


@dataclass
class Version:
    ref: str  # stable id within the benchmark: "<subject>|<attribute>|<n>"
    content: str
    valid_from: datetime


@dataclass
class Question:
    kind: str
    text: str
    expected: str  # a Version.ref
    subject: str
    attribute: str
    phrasing: int


@dataclass
class Dataset:
    memories: list[Version] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def _date(rng: random.Random, year: int) -> datetime:
    return datetime(year, rng.randint(1, 12), rng.randint(1, 28), 9, 0, tzinfo=UTC)


def _subjects(rng: random.Random, n: int) -> list[tuple[str, str]]:
    """(name, kind): half people, a quarter teams, a quarter projects, names unique."""
    people = [f"{f} {la}" for f in FIRST for la in LAST]
    rng.shuffle(people)
    n_people = n // 2
    n_teams = min(len(TEAMS), n // 4)
    n_projects = min(len(PROJECTS), n - n_people - n_teams)
    return (
        [(name, "person") for name in people[:n_people]]
        + [(f"the {t} team", "team") for t in rng.sample(TEAMS, n_teams)]
        + [(f"Project {p}", "project") for p in rng.sample(PROJECTS, n_projects)]
    )


def _when(rng: random.Random, start: datetime, end: datetime) -> tuple[str, datetime] | None:
    """A way to name a time well inside [start, end): a year no change falls in, or a month or day
    more than two months from either end. None if the span is too short."""
    forms: list[tuple[str, datetime]] = []
    for y in range(start.year + 1, end.year):
        at = datetime(y, 7, 1, tzinfo=UTC)
        forms += [(f"in {y}", at), (f"back in {y}", at), (f"during {y}", at)]
    days = (end - start).days
    if days > 150:
        at = start + (end - start) * rng.uniform(0.3, 0.7)
        month = MONTH_NAMES[at.month - 1]
        forms += [
            (f"as of {month} {at.year}", at),
            (f"as of {at.day} {month} {at.year}", at),
            (f"in {month} {at.year}", at),
            (f"as of {at:%Y-%m-%d}", at),
        ]
    return rng.choice(forms) if forms else None


def generate(seed: int, n_subjects: int) -> Dataset:
    rng = random.Random(seed)
    data = Dataset()
    counters = {k: 0 for k in KINDS}

    def pick(kind: str, options: list[str]) -> tuple[int, str]:
        # Phrasings in turn, so that every one is asked about as often.
        i = counters[kind] % len(options)
        counters[kind] += 1
        return i, options[i]

    attributes = {"person": [CITY, EMPLOYER], "team": [DEPLOY_TOOL, DATABASE], "project": [HOSTING, DEPLOY_TOOL]}
    statics = {"person": STATIC_PERSON, "team": STATIC_TEAM, "project": STATIC_PROJECT}
    for subject, kind in _subjects(rng, n_subjects):
        chosen = attributes[kind] if rng.random() < 0.6 else [rng.choice(attributes[kind])]
        for attr in chosen:
            n = rng.choice((3, 4, 4))
            values = rng.sample(attr.values, n)
            year = rng.randint(2012, 2016)
            versions: list[Version] = []
            for i, v in enumerate(values):
                at = _date(rng, year)
                template = rng.choice(attr.first) if i == 0 else rng.choice(attr.change)
                text = template.format(s=subject, v=v, p=values[i - 1] if i else "")
                versions.append(Version(f"{subject}|{attr.name}|{i}", text[0].upper() + text[1:], at))
                year += rng.randint(2, 3)
            data.memories += versions

            def ask(
                kind_: str,
                options: list[str],
                expected: Version,
                subject: str = subject,
                attr: Attribute = attr,
                **fmt: str,
            ) -> None:
                i, template = pick(kind_, options)
                text = template.format(s=subject, **fmt)
                data.questions.append(Question(kind_, text[0].upper() + text[1:], expected.ref, subject, attr.name, i))

            for _ in range(2):
                ask("newest", attr.newest, versions[-1])
                ask("oldest", attr.oldest, versions[0])
            for _ in range(2):
                k = rng.randrange(n)
                end = versions[k + 1].valid_from if k + 1 < n else REFERENCE
                when = _when(rng, versions[k].valid_from, end)
                if when is not None:
                    phrase = when[0]
                    asked = "as-of" if phrase.startswith("as of") else "in-period"
                    ask(asked, attr.as_of, versions[k], when=phrase, When=phrase[0].upper() + phrase[1:])
            k = rng.randrange(1, n)
            ask("before/after", attr.before, versions[k - 1], v=values[k])
            k = rng.randrange(0, n - 1)
            ask("before/after", attr.after, versions[k + 1], v=values[k])
        template, question, options = rng.choice(statics[kind])
        v = rng.choice(options.split("|"))
        text = f"{subject} {template.format(v=v)}."
        static = Version(f"{subject}|static|0", text[0].upper() + text[1:], _date(rng, rng.randint(2012, 2025)))
        data.memories.append(static)
        i, _ = pick("no-cue", [question])
        q = question.format(s=subject)
        data.questions.append(Question("no-cue", q[0].upper() + q[1:], static.ref, subject, "static", i))
    rng.shuffle(data.memories)
    return data


# --- running: the facade on the embedded stack, or REST --------------------------------------------


class Facade:
    def __init__(self, api: Any, p: Any, ns: str) -> None:
        self.api, self.p, self.ns = api, p, ns

    async def store(self, rows: list[dict[str, Any]]) -> list[str]:
        from memvault.memories.schemas import MemoryIn

        out = await self.api.store_many(self.p, self.ns, [MemoryIn(**r) for r in rows])
        return [str(m.id) for m in out]

    async def search(self, body: dict[str, Any]) -> dict[str, Any]:
        from memvault.retrieval.schemas import SearchIn

        out = await self.api.search(self.p, self.ns, SearchIn(**body))
        return dict(out.model_dump(mode="json"))


class Rest:
    def __init__(self, base: str, key: str, ns: str) -> None:
        import httpx

        self.http = httpx.AsyncClient(base_url=base.rstrip("/"), headers={"Authorization": f"Bearer {key}"}, timeout=60)
        self.ns = ns

    async def create_namespace(self) -> None:
        r = await self.http.post("/v1/namespaces", json={"name": self.ns})
        if r.status_code not in (201, 409):
            r.raise_for_status()

    async def store(self, rows: list[dict[str, Any]]) -> list[str]:
        r = await self.http.post(f"/v1/namespaces/{self.ns}/memories/batch", json={"memories": rows})
        r.raise_for_status()
        return [m["id"] for m in r.json()["memories"]]

    async def search(self, body: dict[str, Any]) -> dict[str, Any]:
        r = await self.http.post(f"/v1/namespaces/{self.ns}/search", json=body)
        r.raise_for_status()
        return dict(r.json())


Variant = tuple[str, Callable[[], AbstractContextManager[object]]]


@contextmanager
def _as_before() -> Iterator[object]:
    """The search as it was before the timeline (issue 30): time cues scored over every candidate
    in the fusion (the cues themselves are read as now). In-process only: patched meanwhile."""
    from memvault.retrieval.cues import QueryCues

    saved = QueryCues.__dict__["timeline"]
    QueryCues.timeline = property(lambda self: False)  # type: ignore[assignment,method-assign]
    try:
        yield None
    finally:
        QueryCues.timeline = saved  # type: ignore[method-assign]


def owners_of(data: Dataset, group: int) -> dict[str, str]:
    """Each subject's owner (``user_id``) when subjects are stored in groups of ``group``, in the
    order they were generated; empty for 0 (one shared pool, no owner)."""
    if not group:
        return {}
    subjects = list(dict.fromkeys(q.subject for q in data.questions))
    return {s: f"owner-{i // group}" for i, s in enumerate(subjects)}


def rows_of(data: Dataset, owners: dict[str, str]) -> list[dict[str, Any]]:
    """The memories to store, each with its subject's owner when there are owners."""
    return [
        {
            "content": v.content,
            "valid_from": v.valid_from.isoformat(),
            "type": "fact",
            **({"user_id": owners[v.ref.split("|", 1)[0]]} if owners else {}),
        }
        for v in data.memories
    ]


def body_of(q: Question, owners: dict[str, str], extra: dict[str, Any]) -> dict[str, Any]:
    """The search a question makes: filtered to its subject's owner when there are owners."""
    body = {"query": q.text, "limit": 5, "reference_time": REFERENCE.isoformat(), **extra}
    if owners:
        body["filters"] = {**body.get("filters", {}), "user_id": owners[q.subject]}
    return body


async def run(
    client: Any, data: Dataset, extra: dict[str, Any], variants: list[Variant], owners: dict[str, str] | None = None
) -> dict[str, Any]:
    """Store the memories once, then ask every question of each variant in turn (alternating which
    goes first, so that a warmer cache favours neither). ``owners``: each subject's ``user_id``;
    a question is then asked with that owner as its filter, among its group's memories only."""
    owners = owners or {}
    ids: dict[str, str] = {}
    t0 = time.perf_counter()
    rows = rows_of(data, owners)
    for i in range(0, len(rows), 500):
        stored = await client.store(rows[i : i + 500])
        for v, mid in zip(data.memories[i : i + 500], stored, strict=True):
            ids[mid] = v.ref
    ingest_s = time.perf_counter() - t0
    records: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in variants}
    latencies: dict[str, list[float]] = {name: [] for name, _ in variants}
    for n, q in enumerate(data.questions):
        body = body_of(q, owners, extra)
        for name, variant in variants[n % len(variants) :] + variants[: n % len(variants)]:
            with variant():
                t = time.perf_counter()
                out = await client.search(body)
                latencies[name].append((time.perf_counter() - t) * 1000)
            got = [ids.get(r["memory"]["id"], "?") for r in out["results"]]
            records[name].append(
                {
                    "kind": q.kind,
                    "query": q.text,
                    "expected": q.expected,
                    "attribute": q.attribute,
                    "phrasing": q.phrasing,
                    "retrieved": got,
                    "hit@1": bool(got) and got[0] == q.expected,
                    "hit@5": q.expected in got,
                    "cues": out["metrics"].get("cues", {}),
                    "ms": round(latencies[name][-1], 2),
                }
            )
    return {"ingest_s": ingest_s, "latency_ms": latencies, "questions": records}


def summarise(records: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for kind in (*KINDS, "all"):
        rs = [r for r in records if kind in ("all", r["kind"])]
        if rs:
            out[kind] = {
                "n": len(rs),
                "recall@1": sum(r["hit@1"] for r in rs) / len(rs),
                "recall@5": sum(r["hit@5"] for r in rs) / len(rs),
            }
    return out


def table(summaries: dict[str, dict[str, dict[str, float]]], title: str) -> str:
    names = list(summaries)
    lines = [
        title,
        "",
        "| kind | n | " + " | ".join(f"recall@1 {n} | recall@5 {n}" for n in names) + " |",
        "|---|---|" + "---|---|" * len(names),
    ]
    first = summaries[names[0]]
    for kind, s in first.items():
        cells = " | ".join(
            f"{summaries[n][kind]['recall@1']:.3f} | {summaries[n][kind]['recall@5']:.3f}" for n in names
        )
        lines.append(f"| {kind} | {int(s['n'])} | {cells} |")
    return "\n".join(lines) + "\n"


def latency_table(latencies: dict[str, list[float]], records: dict[str, list[dict[str, Any]]]) -> str:
    """Search latency (facade) per variant: every question, and those with a time cue."""
    from harness import pct

    lines = ["| search latency, ms | p50 | p95 | mean |", "|---|---|---|---|"]
    for name, xs in latencies.items():
        timed = [r["ms"] for r in records[name] if r["kind"] != "no-cue"]
        for label, ys in ((f"{name}: all questions", xs), (f"{name}: with a time cue", timed)):
            if ys:
                lines.append(f"| {label} | {pct(ys, 50):.1f} | {pct(ys, 95):.1f} | {sum(ys) / len(ys):.1f} |")
    return "\n".join(lines) + "\n"


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--subjects", type=int, default=60)
    parser.add_argument("--extra", default=None, help='other SearchIn fields as JSON, e.g. \'{"fusion": "rrf"}\'')
    parser.add_argument("--base", default=None, help="a deployed server's URL: run over REST")
    parser.add_argument("--key", default=None, help="an API key with write access (with --base)")
    parser.add_argument("--namespace", default=None, help="with --base: the namespace (default: a new one)")
    parser.add_argument("--out", type=Path, default=None, help="JSON path")
    parser.add_argument(
        "--group",
        type=int,
        default=0,
        help="store the subjects in groups of this many, each group's memories with an owner of its own "
        "(user_id), and ask each question filtered to its owner: few candidates, as an app that keeps its "
        "end users in one namespace searches (default 0: one pool)",
    )
    parser.add_argument(
        "--ab",
        action="store_true",
        help="in-process only: also run every question as search did before the timeline, alternating (A/B)",
    )
    args = parser.parse_args()
    if args.base and not args.key:
        parser.error("--base needs --key")
    if args.base and args.ab:
        parser.error("--ab compares two code paths in this process: not with --base")
    variants: list[Variant] = [("timeline", nullcontext)]
    if args.ab:
        variants.append(("before", _as_before))
    data = generate(args.seed, args.subjects)
    extra: dict[str, Any] = json.loads(args.extra) if args.extra else {}
    started = time.perf_counter()
    ns = args.namespace or f"evolving-{uuid.uuid4().hex[:8]}"
    if args.base:
        rest = Rest(args.base, args.key, ns)
        await rest.create_namespace()
        result = await run(rest, data, extra, variants, owners_of(data, args.group))
        target = args.base
    else:
        from harness import embedded_app

        from memvault.namespaces.schemas import NamespaceIn
        from memvault.principal import Principal

        async with embedded_app("memvault-evolving-") as stack:
            tenant = await stack.api.create_tenant(f"evolving-{uuid.uuid4().hex[:8]}")
            p = Principal.system(tenant.id, subject="bench")
            await stack.api.create_namespace(p, NamespaceIn(name=ns))
            result = await run(Facade(stack.api, p, ns), data, extra, variants, owners_of(data, args.group))
        target = "facade, embedded PostgreSQL, all-MiniLM-L6-v2"
    summaries = {name: summarise(records) for name, records in result["questions"].items()}
    from harness import ROOT, pct

    commit = (
        __import__("subprocess")
        .run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False)
        .stdout.strip()
    )
    lat = result["latency_ms"]["timeline"]
    report = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit,
        "command": " ".join(sys.argv),
        "target": target,
        "seed": args.seed,
        "subjects": args.subjects,
        "group": args.group,
        "memories": len(data.memories),
        "extra": extra,
        "summary": summaries,
        "latency_ms": {
            name: {"p50": pct(xs, 50), "p95": pct(xs, 95), "mean": sum(xs) / len(xs)}
            for name, xs in result["latency_ms"].items()
        },
        "ingest_s": result["ingest_s"],
        "seconds": time.perf_counter() - started,
        "questions": result["questions"],
    }
    out = args.out or RESULTS / f"evolving-{datetime.now(UTC):%Y-%m-%d-%H%M}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=str))
    title = (
        f"Evolving facts, seed {args.seed}, {args.subjects} subjects, {len(data.memories)} memories, "
        + (f"owners of {args.group} subjects each, " if args.group else "")
        + f"{len(data.questions)} questions; {target}; commit {commit}; search p50 {pct(lat, 50):.1f} ms"
    )
    print(table(summaries, title))
    print(latency_table(result["latency_ms"], result["questions"]))
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
