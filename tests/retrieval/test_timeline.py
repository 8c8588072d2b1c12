"""Time cues within the question's subject (issue 30), through the app on the embedded PostgreSQL
with the real MiniLM: a subject's versions of one fact, each its own memory with its own
valid_from, beside another subject's newer and older memories of the same kind."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import Tenant
from tests.memories.test_router import search, store, store_many
from tests.retrieval.test_search import entity

VERSIONS = [
    ("Ana Duarte lives in Porto.", "2015-03-01T09:00:00Z"),
    ("Ana Duarte moved from Porto to Berlin.", "2019-06-01T09:00:00Z"),
    ("Ana Duarte relocated to Lisbon.", "2023-02-01T09:00:00Z"),
]
REFERENCE = "2026-06-01T00:00:00Z"
AT = "2020-01-01T09:00:00Z"
# Another subject's memories of the same kind: one newer than all of Ana's, one older.
OTHERS = [
    ("Bruno Holm moved to Oslo.", "2025-05-01T09:00:00Z"),
    ("Bruno Holm lives in Dublin.", "2010-01-01T09:00:00Z"),
]


async def first(client: httpx.AsyncClient, tenant: Tenant, query: str) -> tuple[str, dict[str, Any]]:
    out = await search(client, tenant, query, reference_time=REFERENCE)
    return out["results"][0]["memory"]["content"], out


def scores_descend(out: dict[str, Any]) -> bool:
    """Whether ``score`` descends down the results: what a client that sorts or merges by it keeps."""
    scores = [r["score"] for r in out["results"]]
    return scores == sorted(scores, reverse=True)


@pytest.fixture
async def stored(client: httpx.AsyncClient, tenant_a: Tenant) -> dict[str, str]:
    ids = {}
    for content, at in VERSIONS + OTHERS:
        ids[content] = (await store(client, tenant_a, content, valid_from=at))["id"]
    return ids


class TestWithinTheSubject:
    async def test_currently_is_the_subjects_newest_not_anyones(
        self, client: httpx.AsyncClient, tenant_a: Tenant, stored: dict[str, str]
    ) -> None:
        top, out = await first(client, tenant_a, "Where does Ana Duarte currently live?")
        assert top == "Ana Duarte relocated to Lisbon."
        assert out["metrics"]["cues"]["order"] == "newest"
        assert int(out["metrics"]["cues"]["subject"]) == 3
        channels = {r["memory"]["content"]: r["signals"]["channels"]["time"] for r in out["results"]}
        assert channels["Ana Duarte relocated to Lisbon."]["rank"] == 1
        # Bruno's newer move is no version of Ana's: time does not rank it.
        assert channels["Bruno Holm moved to Oslo."]["rank"] is None

    async def test_originally_is_the_subjects_oldest(
        self, client: httpx.AsyncClient, tenant_a: Tenant, stored: dict[str, str]
    ) -> None:
        top, out = await first(client, tenant_a, "Where did Ana Duarte originally live?")
        assert top == "Ana Duarte lives in Porto."
        assert out["metrics"]["cues"]["order"] == "oldest"

    @pytest.mark.parametrize(
        ("query", "expected"),
        [
            ("Where does Ana Duarte live these days?", "Ana Duarte relocated to Lisbon."),
            ("Where did Ana Duarte live at first?", "Ana Duarte lives in Porto."),
            ("Where did Ana Duarte live in 2021?", "Ana Duarte moved from Porto to Berlin."),
            ("As of March 2017, where was Ana Duarte living?", "Ana Duarte lives in Porto."),
            ("As of 1 June 2024, where was Ana Duarte living?", "Ana Duarte relocated to Lisbon."),
            ("Where did Ana Duarte live before moving to Berlin?", "Ana Duarte lives in Porto."),
            ("After leaving Berlin, where did Ana Duarte go?", "Ana Duarte relocated to Lisbon."),
        ],
    )
    async def test_each_kind_of_cue(
        self, client: httpx.AsyncClient, tenant_a: Tenant, stored: dict[str, str], query: str, expected: str
    ) -> None:
        top, out = await first(client, tenant_a, query)
        assert top == expected
        # A version the cue moved up takes its place's score: the order survives a sort by score.
        assert scores_descend(out), [(r["score"], r["memory"]["content"]) for r in out["results"]]

    async def test_the_cues_order_survives_the_entity_hop(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        # The hop merges what it reaches into the hits by score, and sorted them back into the
        # fusion's order: the best fused version above the one the cue asks for.
        porto = await entity(client, tenant_a, "Porto", type="location")
        for content, at in VERSIONS + OTHERS:
            await store(client, tenant_a, content, valid_from=at, entity_ids=[porto] if "Porto" in content else [])
        await store(client, tenant_a, "Porto's old town is a World Heritage site.", valid_from=AT, entity_ids=[porto])
        query = "Where does Ana Duarte currently live?"
        plain = await search(client, tenant_a, query, reference_time=REFERENCE, limit=3, weights={"time": 0})
        assert plain["results"][0]["memory"]["content"] != "Ana Duarte relocated to Lisbon.", "the cue must move it"
        out = await search(client, tenant_a, query, reference_time=REFERENCE, hops=True, limit=3)
        # The hop reached the site through Porto (below the cut: the stage says "skipped").
        assert "hops" in out["metrics"]["stages"]
        assert out["results"][0]["memory"]["content"] == "Ana Duarte relocated to Lisbon."
        assert scores_descend(out)

    async def test_no_cue_no_time_channel_and_the_same_order(
        self, client: httpx.AsyncClient, tenant_a: Tenant, stored: dict[str, str]
    ) -> None:
        plain = await search(client, tenant_a, "Where does Ana Duarte live?")
        off = await search(client, tenant_a, "Where does Ana Duarte live?", weights={"time": 0})
        assert "time" not in plain["results"][0]["signals"]["channels"]
        assert "subject" not in plain["metrics"]["cues"]
        assert [r["memory"]["id"] for r in plain["results"]] == [r["memory"]["id"] for r in off["results"]]

    async def test_weight_zero_turns_the_timeline_off(
        self, client: httpx.AsyncClient, tenant_a: Tenant, stored: dict[str, str]
    ) -> None:
        out = await search(client, tenant_a, "Where does Ana Duarte live now?", weights={"time": 0})
        assert out["metrics"]["cues"]["order"] == "newest"  # read, but not acted on
        assert "subject" not in out["metrics"]["cues"]


# Dated inside 2021, while Ana lived in Berlin: someone else's move and Ana's other fact. "Where did
# Ana live in 2021" asks for the state then, not for what happened in 2021.
IN_2021 = [
    ("Bruno Holm moved to Madrid.", "2021-04-01T09:00:00Z"),
    ("Ana Duarte joined Globex as an engineer.", "2021-09-01T09:00:00Z"),
]
# The same subject's memories of one kind on different days: "what did Ana show Bruno on 13
# October 2023" asks for what happened that day.
SHOWN = [
    ("Ana Duarte showed Bruno Holm her new painting of the harbour.", "2023-10-13T18:00:00Z"),
    ("Ana Duarte showed Bruno Holm the garden she planted.", "2022-05-01T18:00:00Z"),
    ("Ana Duarte showed Bruno Holm her photos from Japan.", "2021-02-01T18:00:00Z"),
]


class TestAmongFewCandidates:
    """A search filtered to one user's memories sees only a few: the fused score, scaled over the
    candidates, put a version's second-best match near 0 beside the best, and an event's words
    ("before moving to Lisbon") lift the one version that says them far above the others. Neither
    may keep the other versions out of the subject."""

    KENJI = [
        ("Kenji lives in Osaka and works at a ramen shop.", "2019-04-01T09:00:00Z"),
        ("Kenji moved to Lisbon for a job at a fintech startup.", "2022-09-01T09:00:00Z"),
        ("Kenji relocated to Montreal to join a game studio.", "2025-01-15T09:00:00Z"),
    ]

    @pytest.mark.parametrize(
        ("query", "expected"),
        [
            ("What did Kenji do before moving to Lisbon?", 0),
            ("Where did Kenji work after leaving Osaka?", 1),
            ("Where did Kenji live before Montreal?", 1),
            ("After Lisbon, where did Kenji go?", 2),
            ("Where did Kenji live in 2021?", 0),
            ("Where does Kenji live now?", 2),
            ("Where did Kenji live originally?", 0),
        ],
    )
    async def test_one_users_versions_filtered(
        self, client: httpx.AsyncClient, tenant_a: Tenant, query: str, expected: int
    ) -> None:
        for content, at in self.KENJI:
            await store(client, tenant_a, content, valid_from=at, user_id="kenji")
        for content, at in OTHERS:
            await store(client, tenant_a, content, valid_from=at, user_id="bruno")
        out = await search(client, tenant_a, query, reference_time=REFERENCE, filters={"user_id": "kenji"})
        assert out["results"][0]["memory"]["content"] == self.KENJI[expected][0], out["metrics"]["cues"]
        assert out["metrics"]["cues"]["subject"] == "3"
        assert scores_descend(out)


class TestStoredTogether:
    """Versions stored in one batch without a ``valid_from`` share one date (the transaction's):
    they follow each other in the order given, as a session's turns do."""

    LENA = [
        "Lena Park drives a red Volvo.",
        "Lena Park sold the Volvo and bought a blue Tesla.",
        "Lena Park replaced the Tesla with a green bicycle.",
    ]

    @pytest.mark.parametrize(
        ("query", "expected"),
        [
            ("What does Lena Park currently use to get around?", 2),
            ("What does Lena Park drive now?", 2),
            ("What did Lena Park drive originally?", 0),
            ("What did Lena Park drive before the Tesla?", 0),
            ("What did Lena Park get after selling the Volvo?", 1),
        ],
    )
    async def test_the_order_given(
        self, client: httpx.AsyncClient, tenant_a: Tenant, query: str, expected: int
    ) -> None:
        made = await store_many(client, tenant_a, self.LENA)
        assert len({m["created_at"] for m in made}) == 1, "one date for all: the order given must decide"
        out = await search(client, tenant_a, query)
        assert out["results"][0]["memory"]["content"] == self.LENA[expected], out["metrics"]["cues"]


class TestSomeoneElsesFacts:
    """A memory that opens on someone of the subject's ("User's sister lives in Paris", "My brother
    moved to Oslo") is that person's fact: never a version of the subject's own, however newer."""

    @pytest.mark.parametrize(
        ("memories", "query", "expected"),
        [
            (
                [
                    ("User lives in Osaka.", "2019-04-01T09:00:00Z"),
                    ("User moved to Lisbon for a new job.", "2022-09-01T09:00:00Z"),
                    ("User's sister lives in Paris.", "2025-03-01T09:00:00Z"),
                    ("User is allergic to shellfish.", "2018-01-01T09:00:00Z"),
                ],
                ["Where does the user live now?", "Where does the user's sister live now?"],
                ["User moved to Lisbon for a new job.", "User's sister lives in Paris."],
            ),
            (
                [
                    ("Kenji lives in Osaka.", "2019-04-01T09:00:00Z"),
                    ("Kenji moved to Lisbon.", "2022-09-01T09:00:00Z"),
                    ("Kenji's daughter Yuki moved to Kyoto.", "2024-05-01T09:00:00Z"),
                ],
                ["Where does Kenji live now?"],
                ["Kenji moved to Lisbon."],
            ),
            (
                [
                    ("I live in Osaka.", "2019-04-01T09:00:00Z"),
                    ("I moved to Lisbon.", "2022-09-01T09:00:00Z"),
                    ("My sister lives in Paris.", "2025-03-01T09:00:00Z"),
                ],
                ["Where do I live now?"],
                ["I moved to Lisbon."],
            ),
        ],
    )
    async def test_not_a_version_of_the_subjects(
        self,
        client: httpx.AsyncClient,
        tenant_a: Tenant,
        memories: list[tuple[str, str]],
        query: list[str],
        expected: list[str],
    ) -> None:
        for content, at in memories:
            await store(client, tenant_a, content, valid_from=at, user_id="u1")
        for question, answer in zip(query, expected, strict=True):
            out = await search(client, tenant_a, question, reference_time=REFERENCE, filters={"user_id": "u1"})
            assert out["results"][0]["memory"]["content"] == answer, (question, out["metrics"]["cues"])


class TestNoNameToGoBy:
    """One user's memories as a chat's extraction writes them: in the first person, naming nobody,
    one dated by what was said ("last month"), the others by when they were stored, later. Their
    mean lies near each of them: every later memory was taken for a newer version of the best."""

    KIM = [
        ("I just moved to Rotterdam last month, still unpacking", "2026-11-01T00:00:00Z"),
        ("I hate crowded places", None),
        ("My budget is 40 euros a month", None),
        ("I need a gym near the city centre", None),
        ("I usually train in the mornings before work", None),
    ]

    @pytest.mark.parametrize(
        ("query", "expected"),
        [
            ("Where do I live now?", "I just moved to Rotterdam last month, still unpacking"),
            ("Where am I living at the moment?", "I just moved to Rotterdam last month, still unpacking"),
        ],
    )
    async def test_a_memory_of_something_else_is_no_newer_version(
        self, client: httpx.AsyncClient, tenant_a: Tenant, query: str, expected: str
    ) -> None:
        for content, at in self.KIM:
            await store(client, tenant_a, content, user_id="kim", **({"valid_from": at} if at else {}))
        out = await search(client, tenant_a, query, filters={"user_id": "kim"})
        assert out["results"][0]["memory"]["content"] == expected, out["metrics"]["cues"]

    async def test_an_earlier_home_is_still_a_version(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        for content, at in [*self.KIM, ("I lived in Utrecht for six years", "2019-05-01T00:00:00Z")]:
            await store(client, tenant_a, content, user_id="kim", **({"valid_from": at} if at else {}))
        out = await search(client, tenant_a, "Where did I live originally?", filters={"user_id": "kim"})
        assert out["results"][0]["memory"]["content"] == "I lived in Utrecht for six years", out["metrics"]["cues"]


class TestTypedInLowerCase:
    """A question with no capital letter ("where does kenji live now", as typed or as keywords)
    names the subject all the same: another person's newer move is no version of Kenji's."""

    @pytest.mark.parametrize(
        ("query", "expected"),
        [
            ("where does kenji live now", "Kenji moved to Lisbon."),
            ("kenji current city", "Kenji moved to Lisbon."),
            ("where did kenji live originally", "Kenji lives in Osaka."),
        ],
    )
    async def test_the_subject_is_named(
        self, client: httpx.AsyncClient, tenant_a: Tenant, query: str, expected: str
    ) -> None:
        for content, at in [
            ("Kenji lives in Osaka.", "2019-04-01T09:00:00Z"),
            ("Kenji moved to Lisbon.", "2022-09-01T09:00:00Z"),
            ("Mia moved to Rome.", "2025-01-10T09:00:00Z"),
            ("Mia lives in Madrid.", "2012-01-10T09:00:00Z"),
        ]:
            await store(client, tenant_a, content, valid_from=at)
        out = await search(client, tenant_a, query, reference_time=REFERENCE)
        assert out["results"][0]["memory"]["content"] == expected, out["metrics"]["cues"]


class TestWindows:
    @pytest.fixture
    async def dated(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        for content, at in VERSIONS + OTHERS + IN_2021 + SHOWN:
            await store(client, tenant_a, content, valid_from=at)

    @pytest.mark.parametrize(
        "query",
        ["Where did Ana Duarte live in 2021?", "During 2021, which city was Ana Duarte based in?"],
    )
    async def test_a_state_in_a_period_is_the_version_in_force_not_what_is_dated_then(
        self, client: httpx.AsyncClient, tenant_a: Tenant, dated: None, query: str
    ) -> None:
        # Before: the window ranked in the fusion alone, and Bruno's move or Ana's new job, both
        # dated in 2021, came first.
        top, out = await first(client, tenant_a, query)
        assert top == "Ana Duarte moved from Porto to Berlin."
        assert scores_descend(out)
        cues = out["metrics"]["cues"]
        assert cues["window"].startswith("2021-01-01")
        assert cues["time_first"] == "2019-06-01"
        time = out["results"][0]["signals"]["channels"]["time"]
        # Picked by the timeline (rank 1), not dated in the window (value 0).
        assert (time["rank"], time["value"]) == (1, 0.0)

    async def test_what_is_dated_then_comes_first_when_the_subject_has_it(
        self, client: httpx.AsyncClient, tenant_a: Tenant, dated: None
    ) -> None:
        top, out = await first(client, tenant_a, "What did Ana Duarte show Bruno Holm on 13 October 2023?")
        assert top == "Ana Duarte showed Bruno Holm her new painting of the harbour."
        assert "time_first" not in out["metrics"]["cues"]
        assert out["results"][0]["signals"]["channels"]["time"]["value"] == 1.0

    async def test_as_of_a_day_is_the_version_in_force(
        self, client: httpx.AsyncClient, tenant_a: Tenant, dated: None
    ) -> None:
        top, _ = await first(client, tenant_a, "As of 1 September 2021, where was Ana Duarte living?")
        assert top == "Ana Duarte moved from Porto to Berlin."
