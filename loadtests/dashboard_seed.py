"""A tenant as the account dashboard sees one after months of use: one large namespace (N memories
with their word index, history, some supersession chains, entity links, tentative and archived
rows) beside a few small ones, API keys, members and an invitation, connected apps, jobs, 30 days
of hourly usage, an audit log, and webhook endpoints with a deliveries log. bench_dashboard.py
measures its pages; infra/scripts/screenshots.py photographs them with a small N.

Memories go through the facade's batch write (rows, memory_terms by its trigger, history, audit,
metering, entity links: what a real write leaves). Only the embedding is short-cut: the model
embeds each distinct corpus sentence once and a memory reusing a sentence (with words of its own
added) gets that sentence's vector (``PhraseBook``). Running the model on 100,000 texts would take
longer than the whole benchmark on the 2 cores this was built on (the seed reports the rate it saw).

Then, as the owner role (the app role may not rewrite history or audit rows, by design), the
rows' times are spread back over the weeks they would have taken to accumulate, and the tables
vacuumed and analysed, so the planner's statistics are those of a settled database.
"""

from __future__ import annotations

import itertools
import json
import random
import time
import uuid
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from scenarios.texts import corpus

TENANT = "acme-robotics"
NAMESPACE = "assistant"
SMALL_NAMESPACES = ("support-bot", "research", "staging")
OWNER_EMAIL = "owner@bench.example"
# A throwaway local database's; never a real account's.
PASSWORD = "bench dashboard password"
USERS = 40  # end users the agent remembers things about
BATCH = 500
HISTORY_DAYS = 120  # memories accumulated over this long
USAGE_DAYS = 30


@dataclass
class Seeded:
    """What the seed made that pages are opened with; kept beside the database as seed.json."""

    tenant: str
    tenant_id: str
    namespace: str
    email: str
    password: str
    memories: int
    memory_id: str
    job_id: str
    key_id: str
    member_id: str
    invitation_id: str
    entity_id: str
    grant_id: str
    session_id: str
    user_id: str
    seconds: float
    embed_texts_per_s: float
    # The webhooks pages came later (issue 31): a seed saved before them has none until
    # add_webhooks tops it up (bench_dashboard.py does, rather than seed everything again).
    endpoint_id: str = ""

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, path: Path) -> Seeded | None:
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None


class PhraseBook:
    """The app's embedder, except for texts it was taught a vector for (the seed's memories)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._known: dict[str, list[float]] = {}
        self.dim = inner.dim

    @property
    def model_id(self) -> str:
        return str(self._inner.model_id)

    def load(self) -> None:
        self._inner.load()

    def teach(self, vectors: dict[str, list[float]]) -> None:
        self._known = vectors

    async def embed(self, texts: Sequence[str], *, tenant: Hashable | None = None) -> list[list[float]]:
        if all(t in self._known for t in texts):
            return [self._known[t] for t in texts]
        return list(await self._inner.embed(texts, tenant=tenant))

    async def embed_query(self, text: str) -> list[float]:
        return list(await self._inner.embed_query(text))

    async def aclose(self) -> None:
        await self._inner.aclose()


@dataclass
class _Sentence:
    speaker: str
    text: str
    session: str
    conversation: str


def _variant(s: _Sentence, i: int, rounds: int) -> str:
    """The i-th memory's text: the sentence as said the first time, later with words of its own,
    so the word index grows as a real namespace's does (numbers, weeks, a few new terms)."""
    if rounds == 0:
        return f"{s.speaker}: {s.text}"
    tags = ("again", "later", "reminder", "follow-up", "noted", "update")
    return f"{s.speaker}: {s.text} ({tags[i % len(tags)]} {rounds}, item {i})"


async def _embed_sentences(book: PhraseBook, sentences: list[str]) -> tuple[dict[str, list[float]], float]:
    started = time.perf_counter()
    vectors: dict[str, list[float]] = {}
    for i in range(0, len(sentences), 256):
        chunk = sentences[i : i + 256]
        vectors.update(zip(chunk, await book.embed(chunk), strict=True))
    return vectors, len(sentences) / max(time.perf_counter() - started, 1e-9)


async def _memories(
    api: Any, book: PhraseBook, p: Any, n: int, distinct: int | None, rng: random.Random, say: Any
) -> float:
    """N memories in the big namespace through store_many, saying ``distinct`` sentences of the
    corpus (default: all it has); returns the model's texts per second.

    A sentence said again gets its vector moved a little (noise of norm ~0.1, normalised again):
    a vector index holding many identical vectors would be easier, or harder, than a real one."""
    import numpy as np

    from memvault.entities.schemas import EntityIn, EntityType
    from memvault.memories.schemas import MemoryIn, MemoryState, MemoryType

    c = corpus()
    sentences = [_Sentence(t.speaker, t.text, t.session, t.conversation) for t in c.turns][: min(n, distinct or n)]
    vectors, rate = await _embed_sentences(book, sorted({f"{s.speaker}: {s.text}" for s in sentences}))
    say(f"embedded {len(vectors)} distinct sentences at {rate:.1f} texts/s ({c.source})")
    places = ["Lisbon", "Osaka", "Nairobi", "Lima", "Oslo", "Hanoi", "Quebec", "Tbilisi", "Perth", "Cork"]
    for name, kind in [(s, EntityType.person) for s in sorted({s.speaker for s in sentences})] + [
        (place, EntityType.location) for place in places
    ]:
        await api.create_entity(p, NAMESPACE, EntityIn(name=name, type=kind))
    noise = np.random.default_rng(24)
    kinds = [MemoryType.event] * 14 + [MemoryType.fact] * 3 + [MemoryType.preference, MemoryType.task]
    started = time.perf_counter()
    for start in range(0, n, BATCH):
        bodies, bases = [], []
        for i in range(start, min(n, start + BATCH)):
            s = sentences[i % len(sentences)]
            bases.append(vectors[f"{s.speaker}: {s.text}"])
            linked = rng.random() < 0.1
            bodies.append(
                MemoryIn(
                    content=_variant(s, i, i // len(sentences)),
                    type=rng.choice(kinds),
                    user_id=f"user-{i % USERS}",
                    session_id=f"{s.conversation}-{s.session}",
                    scope="namespace",
                    metadata={"source": "bench", "conversation": s.conversation},
                    importance=round(rng.random(), 2),
                    state=MemoryState.tentative if rng.random() < 0.05 else MemoryState.stable,
                    entity_names=[s.speaker, rng.choice(places)] if linked else [],
                )
            )
        moved = np.asarray(bases) + noise.normal(0, 0.1 / np.sqrt(book.dim), (len(bases), book.dim))
        moved /= np.linalg.norm(moved, axis=1, keepdims=True)
        again = [start + j >= len(sentences) for j in range(len(bases))]
        taught = [m if a else b for m, a, b in zip(moved.tolist(), again, bases, strict=True)]
        book.teach({b.content: v for b, v in zip(bodies, taught, strict=True)})
        await api.store_many(p, NAMESPACE, bodies)
        if (start // BATCH) % 20 == 0:
            done = min(n, start + BATCH)
            say(f"  {done} memories, {done / (time.perf_counter() - started):.0f}/s")
    book.teach({})
    return rate


async def _versions(api: Any, p: Any, rng: random.Random) -> str:
    """Preferences rewritten under a key (supersession chains with history); returns one id."""
    from memvault.memories.schemas import MemoryIn, MemoryType

    last = ""
    topics = ["diet", "airline seat", "reply style", "time zone", "editor", "meeting time"]
    for user in range(USERS):
        for topic in topics[: 1 + user % len(topics)]:
            for version in range(1 + rng.randrange(3)):
                out = await api.store(
                    p,
                    NAMESPACE,
                    MemoryIn(
                        content=f"user-{user} prefers option {version + 1} for {topic}",
                        type=MemoryType.preference,
                        key=f"{topic}",
                        user_id=f"user-{user}",
                    ),
                )
                last = str(out.id)
    return last


async def _lifecycle(api: Any, p: Any, rng: random.Random, n: int) -> None:
    """Some memories archived, as decay and people do."""
    page = await api.list_memories(p, NAMESPACE, limit=200)
    for m in rng.sample(page.data, min(len(page.data), max(5, n // 1000))):
        await api.archive_memory(p, NAMESPACE, m.id)


async def _people_and_keys(api: Any, p: Any) -> tuple[str, str, str, uuid.UUID]:
    """Members of each role, an invitation, keys (one revoked, some expiring): the ids of a key,
    a member, the invitation, and the owner's."""
    from memvault.keys.schemas import KeyIn
    from memvault.members.schemas import InvitationIn
    from memvault.oauth.schemas import UserIn

    owner = await api.create_user(p, UserIn(email=OWNER_EMAIL, password=PASSWORD, name="Bench Owner", role="owner"))
    member = None
    for i, role in enumerate(["admin", "member", "member", "viewer", "member", "viewer"]):
        member = await api.create_user(
            p, UserIn(email=f"{role}{i}@bench.example", password=PASSWORD, name=f"{role.title()} {i}", role=role)
        )
    invitation = await api.invite_member(p, InvitationIn(email="newcomer@bench.example", role="member"))
    key = None
    for i in range(12):
        key = await api.create_key(
            p,
            KeyIn(
                name=f"agent {i}",
                scopes=["read"] if i % 3 == 0 else ["read", "write"],
                namespaces=[NAMESPACE] if i % 2 else None,
                expires_in_days=30 if i % 4 == 0 else None,
            ),
        )
    assert key is not None and member is not None
    await api.revoke_key(p, key.id)
    return str(key.id), str(member.id), str(invitation.id), owner.id


async def _graph(api: Any, p: Any) -> str:
    from memvault.entities.schemas import RelationIn

    entities = (await api.list_entities(p, NAMESPACE, limit=50)).data
    for a, b in itertools.pairwise(entities):
        await api.create_relation(p, NAMESPACE, RelationIn(source_id=a.id, type="related_to", target_id=b.id))
    return str(entities[0].id)


async def _apps(api: Any, tenant_id: uuid.UUID, user_id: uuid.UUID) -> str:
    """Connected apps: registered clients and the grants members gave them."""
    from memvault.oauth import repository as oauth_repo

    grant = None
    for name in ("Claude Desktop", "Cursor", "VS Code"):
        client = await api.register_client({"client_name": name, "redirect_uris": ["http://127.0.0.1:33418/callback"]})
        async with api._db.tenant_tx(tenant_id) as tx:
            grant = await oauth_repo.create_grant(
                tx.session,
                tenant_id,
                user_id=user_id,
                client_id=client["client_id"],
                scopes=["read", "write"],
                namespaces=[NAMESPACE],
                resource="http://127.0.0.1/mcp",
            )
    assert grant is not None
    return str(grant.id)


async def _jobs(api: Any, tenant_id: uuid.UUID, namespace_id: uuid.UUID, rng: random.Random) -> str:
    """Months of finished maintenance jobs, some failed or cancelled. None is left queued or
    running: the app's dispatcher would take it over at start and run it during the measurement."""
    from memvault.jobs import repository as jobs_repo
    from memvault.jobs.registry import JobKind

    kinds = [JobKind.organize, JobKind.dedup, JobKind.decay, JobKind.promote, JobKind.reembed]
    last = None
    async with api._db.tenant_tx(tenant_id) as tx:
        for i in range(400):
            job, _ = await jobs_repo.create(
                tx.session, tenant_id, namespace_id=namespace_id, kind=kinds[i % len(kinds)],
                payload={"namespace": NAMESPACE}, job_key=f"bench-{i}", created_by="scheduler",
            )  # fmt: skip
            await jobs_repo.claim(tx.session, tenant_id, job.id)
            status = "failed" if i % 97 == 5 else "cancelled" if i % 89 == 7 else "succeeded"
            await jobs_repo.finish(
                tx.session, tenant_id, job.id, status=status,
                result={"examined": rng.randrange(100_000)} if status == "succeeded" else None,
                error="timeout: the step took too long" if status == "failed" else None,
            )  # fmt: skip
            last = job
    assert last is not None
    return str(last.id)


async def _usage(api: Any, tenant_id: uuid.UUID, key_ids: list[str], rng: random.Random) -> None:
    """30 days of hourly usage buckets, as the meter's flush writes them."""
    from memvault.metering import repository as usage_repo

    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    ops = {"search": "searches", "store_many": "memories_written", "get_context": "searches", "get_memory": None}
    rows = []
    for h in range(USAGE_DAYS * 24):
        hour = now - timedelta(hours=h)
        for door in ("rest", "mcp", "sdk"):
            for op, unit in ops.items():
                if rng.random() < 0.4:
                    continue
                requests = rng.randrange(1, 400)
                row = {u: 0 for u in ("memories_written", "searches", "events_ingested", "tokens_embedded")}
                if unit:
                    row[unit] = requests * (20 if unit == "memories_written" else 1)
                row["tokens_embedded"] = requests * 30
                rows.append(
                    {
                        "tenant_id": tenant_id, "hour": hour, "door": door, "namespace": NAMESPACE,
                        "key": rng.choice(key_ids), "operation": op, "requests": requests,
                        "bytes_stored": row["memories_written"] * 120, **row,
                    }
                )  # fmt: skip
    rows.sort(key=lambda r: (r["hour"], r["door"], r["operation"], r["key"]))
    async with api._db.tenant_tx(tenant_id) as tx:
        for i in range(0, len(rows), 2000):
            await usage_repo.add(tx.session, rows[i : i + 2000])


async def _audit(api: Any, tenant_id: uuid.UUID, namespace_id: uuid.UUID, key_ids: list[str], n: int) -> None:
    """The entries single writes leave: agents often store one memory a call, each audited."""
    from memvault.audit import repository as audit_repo

    async with api._db.tenant_tx(tenant_id) as tx:
        for i in range(n):
            await audit_repo.record(
                tx.session, tenant_id, f"key:{key_ids[i % len(key_ids)]}", "memory.create",
                namespace_id=namespace_id, target_id=str(uuid.uuid4()),
            )  # fmt: skip


WEBHOOK_URL = "https://hooks.acme-robotics.example/memvault"
# The main endpoint's log, whatever N: a busy endpoint's month (its pages read one page of it by
# index, and this is what shows it).
DELIVERIES = 100_000


async def add_webhooks(api: Any, tenant_id: uuid.UUID, n: int = DELIVERIES) -> str:
    """Three endpoints (one disabled, one limited to a small namespace) and, for the main one, the
    deliveries log ``n`` memory.created events leave over USAGE_DAYS: most succeeded, one
    in 50 failed with the receiver's answer, one in 97 pending (backing off, due later, so a sender
    started on this database later takes none at once). Written as the sender leaves the rows (no
    sender runs here); the main endpoint's id."""
    from sqlalchemy import text

    from memvault.principal import Principal
    from memvault.webhooks.schemas import WebhookIn, WebhookPatch

    p = Principal.system(tenant_id, subject="bench")
    main = await api.create_webhook(
        p,
        WebhookIn(
            url=WEBHOOK_URL,
            events=["memory.created", "memory.updated", "memory.deleted", "job.failed"],
            description="the assistant's cache refresher",
        ),
    )
    await api.create_webhook(
        p, WebhookIn(url=WEBHOOK_URL + "/support", events=["forget.completed"], namespaces=[SMALL_NAMESPACES[0]])
    )
    gone = await api.create_webhook(p, WebhookIn(url=WEBHOOK_URL + "/old", events=["quota.warning"]))
    await api.update_webhook(p, gone.id, WebhookPatch(enabled=False))
    async with api._db.tenant_tx(tenant_id) as tx:
        await tx.session.execute(
            text(_DELIVERIES), {"t": tenant_id, "e": main.id, "n": n, "ns": NAMESPACE, "days": USAGE_DAYS}
        )
    return str(main.id)


_DELIVERIES = """
INSERT INTO webhook_deliveries (tenant_id, endpoint_id, message_id, event_type, namespace, payload, status,
    attempts, next_attempt_at, last_attempt_at, response_status, response_excerpt, latency_ms, error, created_at)
SELECT :t, :e, 'msg_' || md5(i::text), 'memory.created', :ns,
       jsonb_build_object('type', 'memory.created', 'timestamp', at, 'data', jsonb_build_object('id', md5(i::text))),
       s.status,
       CASE s.status WHEN 'succeeded' THEN 1 WHEN 'failed' THEN 7 ELSE 3 END,
       CASE s.status WHEN 'pending' THEN now() + interval '1 hour' ELSE at + interval '31 hours' END,
       at + interval '1 second',
       CASE s.status WHEN 'succeeded' THEN 200 ELSE 503 END,
       CASE s.status WHEN 'succeeded' THEN '{"ok": true}' ELSE '<html><body><h1>503 Service Unavailable</h1>'
            || '<p>The upstream is overloaded; try again later.</p></body></html>' END,
       20 + (i * 37) % 400,
       CASE s.status WHEN 'succeeded' THEN NULL ELSE 'HTTP 503' END,
       at
FROM generate_series(1, :n) i,
     LATERAL (SELECT now() - make_interval(secs => :days * 86400.0 * (:n - i) / :n) AS at) t,
     LATERAL (SELECT CASE WHEN i % 97 = 80 THEN 'pending' WHEN i % 50 = 7 THEN 'failed' ELSE 'succeeded' END
              AS status) s
"""


async def seed(api: Any, book: PhraseBook, n: int, *, distinct: int | None = None, say: Any = print) -> Seeded:
    """Make the tenant (see the module's docstring) through the facade ``api`` whose embedder is
    ``book``; ``distinct``: how many of the corpus's sentences the memories say (the model embeds
    each once)."""
    from memvault.namespaces.schemas import NamespaceIn
    from memvault.plans.limits import PlanLimits
    from memvault.principal import Principal

    rng = random.Random(24)
    started = time.perf_counter()
    await api.save_plan(
        "bench-team",
        PlanLimits(memories=max(250_000, 2 * n), namespaces=20, api_keys=50, members=25),
        "the dashboard benchmark's tenant: quotas with room, as a paying team has",
    )
    tenant = await api.create_tenant(TENANT, namespace=NAMESPACE, plan="bench-team")
    p = Principal.system(tenant.id, subject="bench")
    for name in SMALL_NAMESPACES:
        await api.create_namespace(p, NamespaceIn(name=name, description=f"The {name} agent's memories."))
    key_id, member_id, invitation_id, owner_id = await _people_and_keys(api, p)
    rate = await _memories(api, book, p, n, distinct, rng, say)
    memory_id = await _versions(api, p, rng)
    await _lifecycle(api, p, rng, n)
    entity_id = await _graph(api, p)
    namespace = await api.get_namespace(p, NAMESPACE)
    grant_id = await _apps(api, tenant.id, owner_id)
    job_id = await _jobs(api, tenant.id, namespace.id, rng)
    keys = [str(k.id) for k in (await api.list_keys(p, limit=50)).data]
    await _usage(api, tenant.id, keys, rng)
    await _audit(api, tenant.id, namespace.id, keys, n // 2)
    # Last: an endpoint subscribed earlier would have queued a delivery for every write above.
    endpoint_id = await add_webhooks(api, tenant.id)
    say(f"seeded the tenant in {time.perf_counter() - started:.0f} s")
    first = corpus().turns[0]
    return Seeded(
        tenant=tenant.name,
        tenant_id=str(tenant.id),
        namespace=NAMESPACE,
        email=OWNER_EMAIL,
        password=PASSWORD,
        memories=n,
        memory_id=memory_id,
        job_id=job_id,
        key_id=key_id,
        member_id=member_id,
        invitation_id=invitation_id,
        entity_id=entity_id,
        grant_id=grant_id,
        session_id=f"{first.conversation}-{first.session}",
        user_id="user-1",
        seconds=round(time.perf_counter() - started, 1),
        embed_texts_per_s=round(rate, 1),
        endpoint_id=endpoint_id,
    )


# Run as the owner: history and audit rows are append-only for the app role.
_AGE = (
    # Memories: the oldest HISTORY_DAYS ago, the newest now, in the order they were written.
    """
    UPDATE memories m SET created_at = now() - make_interval(secs => span.secs * (span.hi - m.seq) / span.width),
                          recorded_at = now() - make_interval(secs => span.secs * (span.hi - m.seq) / span.width),
                          updated_at = now() - make_interval(secs => span.secs * (span.hi - m.seq) / span.width)
    FROM (SELECT max(seq)::float8 AS hi, greatest(max(seq) - min(seq), 1)::float8 AS width, %(days)s * 86400.0 AS secs
          FROM memories WHERE tenant_id = %(t)s) span
    WHERE m.tenant_id = %(t)s AND m.superseded_at IS NULL AND m.key IS NULL
    """,
    """
    UPDATE memory_history h SET at = m.created_at FROM memories m
    WHERE h.tenant_id = %(t)s AND m.tenant_id = %(t)s AND m.id = h.memory_id AND h.action = 'created'
    """,
    # Audit entries and jobs over the last USAGE_DAYS, in their order.
    """
    UPDATE audit_log a SET at = now() - make_interval(secs => %(recent)s * 86400.0 * (span.hi - a.id) / span.width)
    FROM (SELECT max(id)::float8 AS hi, greatest(max(id) - min(id), 1)::float8 AS width
          FROM audit_log WHERE tenant_id = %(t)s) span
    WHERE a.tenant_id = %(t)s
    """,
    """
    UPDATE jobs j SET created_at = j.created_at - shift.by, started_at = j.started_at - shift.by,
                      finished_at = j.finished_at - shift.by, updated_at = j.updated_at - shift.by
    FROM (SELECT id, make_interval(secs => %(recent)s * 86400.0
                 * (1 - row_number() OVER (ORDER BY created_at, job_key)::float8 / count(*) OVER ())) AS by
          FROM jobs WHERE tenant_id = %(t)s) shift
    WHERE j.tenant_id = %(t)s AND j.id = shift.id
    """,
)


def settle(owner_url: Any, tenant_id: str) -> None:
    """Spread the rows' times back over the weeks they took (see the module's docstring), then
    VACUUM ANALYZE: the visibility map and the statistics of a database that has settled."""
    import psycopg

    dsn = owner_url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as conn:
        with conn.transaction():
            for statement in _AGE:
                conn.execute(statement, {"t": tenant_id, "days": HISTORY_DAYS, "recent": USAGE_DAYS})
        conn.execute("VACUUM (ANALYZE)")


def vacuum(owner_url: Any, tables: Sequence[str]) -> None:
    """VACUUM ANALYZE these tables (rows added to a settled seed)."""
    import psycopg

    dsn = owner_url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"VACUUM (ANALYZE) {', '.join(tables)}")
