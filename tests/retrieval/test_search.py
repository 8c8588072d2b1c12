"""Search signals and fusion as a client sees them: each signal moves the ranking the way it
should, weights are validated, results explain themselves, neighbours come from the same session,
and no search reaches another tenant.

Pairs of memories with the same words leave dense and lexical retrieval tied, so the ranking
between them is the signal's doing; where the wording differs, the opposite cue must flip it."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import event, text

from memvault.api import NamespaceAPI
from memvault.db.session import Database
from memvault.memories.schemas import MemoryFilters, MemoryIn
from memvault.retrieval.schemas import SearchIn
from memvault.retrieval.sql.statement import statement_for
from tests.conftest import Tenant
from tests.memories.test_router import BATCH, MEMORIES, listed, problem, search, store

SEARCH = "/v1/namespaces/default/search"


def contents(out: dict[str, Any]) -> list[str]:
    return [r["memory"]["content"] for r in out["results"]]


def by_id(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["memory"]["id"]: r for r in out["results"]}


def iso(d: datetime) -> str:
    return d.isoformat()


class TestTimeCues:
    async def test_currently_ranks_the_newest_and_originally_the_oldest(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        old = await store(
            client,
            tenant_a,
            "Ana prefers green tea in the morning",
            type="preference",
            valid_from="2023-01-10T08:00:00Z",
        )
        new = await store(
            client,
            tenant_a,
            "Ana prefers black coffee in the morning",
            type="preference",
            valid_from="2024-06-01T08:00:00Z",
        )
        await store(client, tenant_a, "The office wifi password was rotated", valid_from="2024-07-01T08:00:00Z")

        now = await search(client, tenant_a, "what does Ana currently prefer in the morning")
        first = await search(client, tenant_a, "what did Ana originally prefer in the morning")

        assert now["results"][0]["memory"]["id"] == new["id"]
        assert first["results"][0]["memory"]["id"] == old["id"]
        assert now["metrics"]["cues"]["order"] == "newest"
        assert (
            by_id(now)[new["id"]]["signals"]["channels"]["time"]["rank"]
            < by_id(now)[old["id"]]["signals"]["channels"]["time"]["rank"]
        )

    async def test_a_named_month_favours_memories_from_it(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        ids = {}
        for month in (1, 3, 6):
            m = await store(
                client,
                tenant_a,
                f"Offsite in Porto, edition {month}: the team planned the roadmap",
                type="event",
                valid_from=iso(datetime(2023, month, 14, tzinfo=UTC)),
            )
            ids[month] = m["id"]

        march = await search(client, tenant_a, "what did the team plan at the offsite in March 2023")
        june = await search(client, tenant_a, "what did the team plan at the offsite in June 2023")

        assert march["results"][0]["memory"]["id"] == ids[3]
        assert june["results"][0]["memory"]["id"] == ids[6]
        assert march["metrics"]["cues"]["window"].startswith("2023-03-01")
        assert by_id(march)[ids[3]]["signals"]["channels"]["time"] == {"rank": 1, "value": 1.0}
        assert by_id(march)[ids[1]]["signals"]["channels"]["time"] == {"rank": None, "value": 0.0}

    async def test_relative_cues_use_the_reference_time(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        ref = datetime(2024, 5, 15, 12, tzinfo=UTC)
        yesterday = await store(
            client, tenant_a, "Standup: the deploy was blocked by tests", valid_from=iso(ref - timedelta(days=1))
        )
        await store(
            client, tenant_a, "Standup: the deploy was blocked by review", valid_from=iso(ref - timedelta(days=9))
        )

        out = await search(
            client, tenant_a, "why was the deploy blocked yesterday", reference_time=iso(ref), weights={"recency": 0}
        )

        assert out["results"][0]["memory"]["id"] == yesterday["id"]
        assert out["metrics"]["cues"]["window"] == "2024-05-14T00:00:00+00:00/2024-05-15T00:00:00+00:00"


class TestIntent:
    @pytest.mark.parametrize(
        ("query", "wanted"),
        [("what did we decide about the billing database", "decision"), ("what do we like for billing", "preference")],
    )
    async def test_the_asked_type_wins_over_the_same_words(
        self, client: httpx.AsyncClient, tenant_a: Tenant, query: str, wanted: str
    ) -> None:
        stored = {}
        for type_ in ("fact", "decision", "preference"):
            stored[type_] = await store(client, tenant_a, "Billing database: PostgreSQL with pgvector", type=type_)

        out = await search(client, tenant_a, query)

        top = out["results"][0]
        assert top["memory"]["id"] == stored[wanted]["id"]
        assert top["signals"]["channels"]["intent"] == {"rank": 1, "value": 1.0}
        assert top["score"] > out["results"][1]["score"]  # not a tie broken by id
        assert out["metrics"]["cues"]["intent"] == wanted

    async def test_weight_zero_turns_the_channel_off(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await store(client, tenant_a, "Billing database: PostgreSQL", type="fact")
        await store(client, tenant_a, "Billing database: PostgreSQL", type="decision")

        out = await search(client, tenant_a, "what did we decide about billing", weights={"intent": 0})

        assert "intent" not in out["metrics"]["weights"]
        assert out["results"][0]["score"] == out["results"][1]["score"]


class TestPriors:
    async def test_recency_favours_the_newer_of_equal_memories(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        now = datetime.now(UTC)
        old = await store(
            client, tenant_a, "The release train leaves on Fridays", valid_from=iso(now - timedelta(days=400))
        )
        new = await store(
            client, tenant_a, "The release train leaves on Fridays", valid_from=iso(now - timedelta(days=2))
        )

        out = await search(client, tenant_a, "release train day", weights={"recency": 0.5})

        assert [r["memory"]["id"] for r in out["results"]] == [new["id"], old["id"]]
        assert out["results"][0]["score"] > out["results"][1]["score"]
        recency = [r["signals"]["channels"]["recency"]["value"] for r in out["results"]]
        assert recency[0] > 0.9 > 0.01 > recency[1]  # 2 days and 400 days at a 30-day half-life

    async def test_importance_favours_the_more_important(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        low = await store(client, tenant_a, "Rotate the signing keys every quarter", importance=0.1)
        high = await store(client, tenant_a, "Rotate the signing keys every quarter", importance=0.9)

        out = await search(client, tenant_a, "signing keys rotation", weights={"importance": 0.5})

        assert [r["memory"]["id"] for r in out["results"]] == [high["id"], low["id"]]
        assert out["results"][0]["signals"]["channels"]["importance"]["rank"] == 1

    async def test_access_favours_the_often_recalled(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        rare = await store(client, tenant_a, "The staging cluster lives in eu-west-1")
        used = await store(client, tenant_a, "The staging cluster lives in eu-west-1")
        for _ in range(4):
            assert (await client.get(f"{MEMORIES}/{used['id']}", headers=tenant_a.headers)).status_code == 200

        out = await search(client, tenant_a, "staging cluster region", weights={"access": 0.5})

        assert [r["memory"]["id"] for r in out["results"]] == [used["id"], rare["id"]]
        assert out["results"][0]["signals"]["channels"]["access"]["value"] > 0


class TestExplanation:
    async def test_signals_metrics_and_normalised_score(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await store(client, tenant_a, "The zorblax adapter connects the sensor to the hub")
        await store(client, tenant_a, "Our team standup happens every morning at nine")

        out = await search(client, tenant_a, "zorblax adapter")

        top = out["results"][0]
        assert top["score"] == pytest.approx(1.0)  # first everywhere that has weight
        assert set(top["signals"]["channels"]) == {"dense", "lexical", "recency", "importance", "access", "strength"}
        assert top["signals"]["channels"]["dense"]["value"] == top["semantic_relevance"]
        assert top["signals"]["channels"]["lexical"]["rank"] == top["signals"]["lexical_rank"] == 1
        metrics = out["metrics"]
        assert metrics["candidates"] == {"dense": 2, "lexical": 1}
        # Recency, importance and access explain but do not rank unless asked for (docs/benchmarks.md).
        assert set(metrics["weights"]) == {"dense", "lexical"}
        assert {"embed", "sql", "total"} <= metrics["timings_ms"].keys()
        assert metrics["cues"] == {}
        assert top["neighbours"] is None

    async def test_min_score_still_compares_semantic_relevance(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        await store(client, tenant_a, "The user prefers dark roast coffee", type="preference")
        await store(client, tenant_a, "The production database runs PostgreSQL 16", type="preference", importance=1.0)

        out = await search(
            client, tenant_a, "favourite hot drink", min_score=0.3, weights={"importance": 10, "intent": 10}
        )

        assert contents(out) == ["The user prefers dark roast coffee"]
        assert out["metrics"]["min_score_applied"] is True
        assert all(r["semantic_relevance"] >= 0.3 for r in out["results"])

    @pytest.mark.parametrize(
        "weights", [{"dense": 11}, {"recency": -0.1}, {"pagerank": 1}, {"dense": "lots"}, {"time": None}]
    )
    async def test_bad_weights_are_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, weights: dict[str, Any]
    ) -> None:
        r = await client.post(SEARCH, json={"query": "x", "weights": weights}, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"].startswith("weights")

    @pytest.mark.parametrize("body", [{"neighbours": 6}, {"neighbours": -1}, {"reference_time": "soon"}])
    async def test_bad_neighbours_or_reference_time_are_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, body: dict[str, Any]
    ) -> None:
        r = await client.post(SEARCH, json={"query": "x", **body}, headers=tenant_a.headers)

        problem(r, 422, "validation_error")


class TestNeighbours:
    async def turns(self, client: httpx.AsyncClient, tenant: Tenant, session: str, texts: list[str]) -> list[str]:
        start = datetime(2024, 3, 1, 9, tzinfo=UTC)
        out = []
        for i, t in enumerate(texts):
            m = await store(
                client,
                tenant,
                t,
                type="event",
                scope="session",
                session_id=session,
                valid_from=iso(start + timedelta(minutes=i)),
            )
            out.append(m["id"])
        return out

    async def test_returns_adjacent_turns_of_the_same_session(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        ids = await self.turns(
            client,
            tenant_a,
            "s1",
            [
                "Mel: how was the weekend?",
                "Caro: we went hiking near Sintra",
                "Mel: nice, who came along?",
                "Caro: my sister and her zorblax-obsessed dog",
                "Mel: ha, how old is the dog?",
                "Caro: about three years",
                "Mel: see you Monday",
            ],
        )
        await self.turns(client, tenant_a, "s2", ["Mel: the zorblax is back in stock"])

        out = await search(
            client, tenant_a, "sister's dog zorblax", neighbours=2, filters={"session_id": "s1"}, limit=1
        )

        hit = out["results"][0]
        assert hit["memory"]["id"] == ids[3]
        assert [m["id"] for m in hit["neighbours"]] == [ids[1], ids[2], ids[4], ids[5]]
        assert "neighbours" in out["metrics"]["timings_ms"]

    async def test_edges_of_a_session_and_memories_without_one(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        ids = await self.turns(client, tenant_a, "s1", ["Caro: zorblax first", "Mel: second", "Caro: third"])
        await store(client, tenant_a, "A zorblax note with no session")

        out = await search(client, tenant_a, "zorblax", neighbours=5)

        got = {r["memory"]["content"]: [m["id"] for m in r["neighbours"]] for r in out["results"]}
        assert got["Caro: zorblax first"] == [ids[1], ids[2]]
        assert got["A zorblax note with no session"] == []

    async def test_strength_favours_the_recalled_and_important(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        weak = await store(client, tenant_a, "The backup bucket is called cold-store", importance=0.2)
        strong = await store(client, tenant_a, "The backup bucket is called cold-store", importance=0.8)
        for _ in range(3):
            assert (await client.get(f"{MEMORIES}/{strong['id']}", headers=tenant_a.headers)).status_code == 200

        out = await search(client, tenant_a, "backup bucket name", weights={"strength": 0.5})

        assert [r["memory"]["id"] for r in out["results"]] == [strong["id"], weak["id"]]
        values = [r["signals"]["channels"]["strength"]["value"] for r in out["results"]]
        # 1 + ln(4) recalls times 0.5 + 0.8 importance, against 1 x 0.7: both fresh.
        assert values[0] == pytest.approx((1 + math.log(4)) * 1.3, rel=0.01)
        assert values[1] == pytest.approx(0.7, rel=0.01)


ENTITIES = "/v1/namespaces/default/entities"


async def entity(client: httpx.AsyncClient, tenant: Tenant, name: str, **fields: Any) -> str:
    r = await client.post(ENTITIES, json={"name": name, "type": "person", **fields}, headers=tenant.headers)
    assert r.status_code in (200, 201), r.text
    return str(r.json()["id"])


class TestGraph:
    """Entities the query names favour the memories linked to them, and more weakly those linked
    to an entity one relation away."""

    async def test_the_named_person_wins_over_the_same_words(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        ana = await entity(client, tenant_a, "Ana Lima", aliases=["Ana"])
        ben = await entity(client, tenant_a, "Ben")
        hers = await store(client, tenant_a, "Loves hiking in the mountains on weekends", entity_ids=[ana])
        his = await store(client, tenant_a, "Loves hiking in the mountains on weekends", entity_ids=[ben])

        for query, first, second in [
            ("What does Ana do on weekends?", hers, his),
            ("what does ben do on weekends", his, hers),
            ("Ana Lima's weekends?", hers, his),
        ]:
            out = await search(client, tenant_a, query, weights={"graph": 1})

            assert [r["memory"]["id"] for r in out["results"]][:2] == [first["id"], second["id"]], query
            assert out["results"][0]["signals"]["channels"]["graph"] == {"rank": 1, "value": 1.0}
            assert out["results"][1]["signals"]["channels"]["graph"] == {"rank": None, "value": 0.0}

        assert out["metrics"]["cues"]["entities"] == "Ana Lima"
        assert out["metrics"]["weights"]["graph"] == 1

    async def test_a_related_entity_counts_less_than_the_named_one(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        ana = await entity(client, tenant_a, "Ana")
        rex = await entity(client, tenant_a, "Rex", type="other")
        other = await entity(client, tenant_a, "Mia")
        r = await client.post(
            f"{ENTITIES[: -len('/entities')]}/relations",
            json={"source_id": ana, "type": "owns", "target_id": rex},
            headers=tenant_a.headers,
        )
        assert r.status_code == 201, r.text
        unrelated = await store(client, tenant_a, "Needs a walk twice a day", entity_ids=[other])
        related = await store(client, tenant_a, "Needs a walk twice a day", entity_ids=[rex])
        named = await store(client, tenant_a, "Needs a walk twice a day", entity_ids=[ana])

        out = await search(client, tenant_a, "Who in Ana's home needs a walk?", weights={"graph": 1})

        assert [r["memory"]["id"] for r in out["results"]] == [named["id"], related["id"], unrelated["id"]]
        assert [r["signals"]["channels"]["graph"]["value"] for r in out["results"]] == [1.0, 0.5, 0.0]

    async def test_no_entity_named_no_channel_and_a_word_inside_a_name_does_not_count(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        ana = await entity(client, tenant_a, "Anabel")
        await store(client, tenant_a, "Collects old maps", entity_ids=[ana])

        out = await search(client, tenant_a, "Who collects old maps? Ana?", weights={"graph": 1})

        assert "graph" not in out["results"][0]["signals"]["channels"]
        assert "graph" not in out["metrics"]["weights"]
        assert "entities" not in out["metrics"]["cues"]

    async def test_another_tenants_entities_are_not_read(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        await entity(client, tenant_b, "Zed")
        await store(client, tenant_a, "Zed repairs bicycles")

        out = await search(client, tenant_a, "what does Zed repair", weights={"graph": 1})

        assert "entities" not in out["metrics"]["cues"]
        assert "graph" not in out["results"][0]["signals"]["channels"]


class TestFusion:
    async def test_weighted_scores_are_weighted_means_of_scaled_values(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        await store(client, tenant_a, "The quarterly report is due on the fifth")
        await store(client, tenant_a, "Quarterly planning happens in the big room")
        await store(client, tenant_a, "Lunch is served at noon")

        out = await search(client, tenant_a, "quarterly report due date", fusion="weighted")

        assert out["metrics"]["fusion"] == "weighted"
        scores = [r["score"] for r in out["results"]]
        assert scores == sorted(scores, reverse=True)
        assert all(0.0 <= s <= 1.0 for s in scores)
        top = out["results"][0]
        assert top["memory"]["content"] == "The quarterly report is due on the fifth"
        # Best cosine and best text rank among the candidates: both scale to 1, so the mean is 1.
        assert top["score"] == pytest.approx(1.0)

    async def test_weighted_fusion_follows_the_weights(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        # Words favour the first, meaning the second: each channel alone decides.
        await store(client, tenant_a, "Kettle kettle kettle: the office kettle descaling rota")
        await store(client, tenant_a, "Boiling water for tea in the workplace kitchen")

        by_words = await search(
            client, tenant_a, "office kettle", fusion="weighted", weights={"dense": 0, "lexical": 1}
        )
        by_meaning = await search(
            client, tenant_a, "hot water for a cuppa at work", fusion="weighted", weights={"dense": 1, "lexical": 0}
        )

        assert contents(by_words)[0].startswith("Kettle")
        assert contents(by_meaning)[0].startswith("Boiling")
        assert by_words["results"][0]["score"] == pytest.approx(1.0)

    async def test_namespace_settings_are_the_defaults_and_the_request_overrides_them(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        await store(client, tenant_a, "The VPN needs a hardware token")
        r = await client.patch(
            "/v1/namespaces/default",
            json={"settings": {"search": {"weights": {"dense": 0, "lexical": 2}, "fusion": "weighted"}}},
            headers=tenant_a.headers,
        )
        assert r.status_code == 200, r.text

        by_namespace = await search(client, tenant_a, "VPN token")
        by_request = await search(client, tenant_a, "VPN token", fusion="rrf", weights={"dense": 1})

        assert by_namespace["metrics"]["fusion"] == "weighted"
        assert by_namespace["metrics"]["weights"] == {"lexical": 2}
        assert by_request["metrics"]["fusion"] == "rrf"
        assert by_request["metrics"]["weights"] == {"dense": 1, "lexical": 2}

    async def test_bad_fusion_is_422(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post(SEARCH, json={"query": "x", "fusion": "max"}, headers=tenant_a.headers)

        problem(r, 422, "validation_error")


class TestDateRange:
    """``since`` and ``until`` keep the memories dated in a range (``valid_from``, else when stored)
    on every read path, inside SQL: both channels find what lies in the range however many better
    matches lie outside it."""

    async def store_dated(
        self, client: httpx.AsyncClient, tenant: Tenant, items: list[tuple[str, datetime]]
    ) -> list[str]:
        body = {"memories": [{"content": c, "valid_from": iso(d), "session_id": "trip"} for c, d in items]}
        r = await client.post(BATCH, json=body, headers=tenant.headers)
        assert r.status_code == 201, r.text
        return [m["id"] for m in r.json()["memories"]]

    async def test_lists_and_searches_keep_the_range(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        jan, mar, jun = await self.store_dated(
            client,
            tenant_a,
            [
                (f"Offsite in Porto, edition {m}: the team planned the roadmap", datetime(2023, m, 14, tzinfo=UTC))
                for m in (1, 3, 6)
            ],
        )
        undated = await store(client, tenant_a, "Offsite in Porto, next edition: the roadmap again")  # dated now

        spring = {"since": "2023-02-01", "until": "2023-05-01T00:00:00Z"}
        assert [m["id"] for m in await listed(client, tenant_a, spring)] == [mar]
        assert [m["id"] for m in await listed(client, tenant_a, {"until": "2023-03-14T00:00:00Z"})] == [jan]
        # `since` is inclusive, `until` exclusive.
        later = await listed(client, tenant_a, {"since": "2023-03-14T00:00:00Z"})
        assert {m["id"] for m in later} == {mar, jun, undated["id"]}

        out = await search(client, tenant_a, "Porto offsite roadmap", filters=spring)
        assert [r["memory"]["id"] for r in out["results"]] == [mar]

    @pytest.mark.parametrize("channel", ["dense", "lexical"])
    async def test_each_channel_finds_the_dated_memory_behind_better_matches(
        self, client: httpx.AsyncClient, tenant_a: Tenant, channel: str
    ) -> None:
        # 60 closer matches in 2024, more than a channel's 50 candidates: a range applied after
        # retrieval would leave nothing.
        await self.store_dated(
            client,
            tenant_a,
            [
                (
                    f"Zorblax tea tasting number {i} in the Lisbon office",
                    datetime(2024, 1, 1, tzinfo=UTC) + timedelta(hours=i),
                )
                for i in range(60)
            ],
        )
        (old,) = await self.store_dated(
            client,
            tenant_a,
            [("A zorblax brew was tried once at a Lisbon market stall", datetime(2022, 5, 2, tzinfo=UTC))],
        )
        other = "lexical" if channel == "dense" else "dense"

        out = await search(
            client,
            tenant_a,
            "zorblax tea tasting in Lisbon",
            filters={"until": "2023-01-01T00:00:00Z"},
            weights={other: 0, "context": 0},
        )

        assert [r["memory"]["id"] for r in out["results"]] == [old]
        assert out["metrics"]["matched_by"][channel] == 1

    async def test_neighbours_and_context_keep_the_range(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        turns = ["Where should we stay in Kyoto?", "The ryokan near Gion has rooms in April", "Book the ryokan then"]
        first, second, third = await self.store_dated(
            client, tenant_a, [(t, datetime(2023, 4, 1 + i, tzinfo=UTC)) for i, t in enumerate(turns)]
        )

        out = await search(
            client, tenant_a, "ryokan near Gion", limit=1, neighbours=1, filters={"since": "2023-04-02T00:00:00Z"}
        )
        top = out["results"][0]
        assert top["memory"]["id"] == second
        assert [m["id"] for m in top["neighbours"]] == [third]

        r = await client.post(
            "/v1/namespaces/default/context",
            json={"query": "Kyoto stay", "filters": {"until": "2023-04-02T00:00:00Z"}},
            headers=tenant_a.headers,
        )
        assert r.status_code == 200, r.text
        assert r.json()["memory_ids"] == [first]

    @pytest.mark.parametrize(
        "filters",
        [
            {"since": "2023-05-01T00:00:00Z", "until": "2023-05-01T00:00:00Z"},
            {"since": "2023-05-01T00:00:00Z", "until": "2023-04-01T00:00:00Z"},
            {"until": "not a date"},
        ],
    )
    async def test_a_bad_range_is_422_in_search_and_list(
        self, client: httpx.AsyncClient, tenant_a: Tenant, filters: dict[str, str]
    ) -> None:
        r = await client.post(SEARCH, json={"query": "x", "filters": filters}, headers=tenant_a.headers)
        assert problem(r, 422, "validation_error")["field"] == "filters.until"

        r = await client.get(MEMORIES, params=filters, headers=tenant_a.headers)
        assert problem(r, 422, "validation_error")["field"] == "until"

    async def test_another_tenants_dated_memories_stay_unseen(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        await self.store_dated(
            client, tenant_a, [("Zorblax harvest festival in Porto", datetime(2023, 9, 9, tzinfo=UTC))]
        )
        spring = {"since": "2023-01-01T00:00:00Z", "until": "2024-01-01T00:00:00Z"}

        assert await listed(client, tenant_b, spring) == []
        out = await search(client, tenant_b, "zorblax harvest festival Porto", filters=spring)
        assert out["results"] == []


class TestIsolation:
    async def test_other_tenant_sees_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        await store(
            client,
            tenant_a,
            "Ana currently prefers zorblax tea",
            type="preference",
            scope="session",
            session_id="s1",
            valid_from="2024-03-02T00:00:00Z",
        )
        await store(client, tenant_b, "Unrelated note", scope="session", session_id="s1")

        out = await search(
            client,
            tenant_b,
            "what does Ana currently prefer in March 2024 zorblax",
            neighbours=5,
            weights={"recency": 10, "importance": 10, "access": 10, "intent": 10, "time": 10},
        )

        assert all("zorblax" not in c for c in contents(out))
        for r in out["results"]:
            assert all("zorblax" not in m["content"] for m in r["neighbours"])


class TestStatementReuse:
    """The hybrid statement is built once per shape and kept for every tenant (retrieval/sql/statement.py):
    what a search varies must reach it as parameters, never stay baked into the statement that the
    next search, perhaps another tenant's, runs again."""

    async def test_a_reused_statement_takes_each_searchs_own_values(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        now = datetime.now(UTC)
        train = "The release train leaves on Fridays"
        await store(client, tenant_a, train, valid_from=iso(now - timedelta(days=30)))
        await store(client, tenant_b, "The release train leaves on Mondays", valid_from=iso(now))

        first = await search(client, tenant_a, "release train day", reference_time=iso(now), weights={"recency": 0.7})
        built = statement_for.cache_info().misses
        month_on = iso(now + timedelta(days=30))
        later = await search(client, tenant_a, "release train day", reference_time=month_on, weights={"recency": 0.3})
        other = await search(client, tenant_b, "release train day", reference_time=month_on, weights={"recency": 0.3})

        assert statement_for.cache_info().misses == built  # the same shape: nothing built again
        recency = [out["results"][0]["signals"]["channels"]["recency"]["value"] for out in (first, later)]
        assert recency == [pytest.approx(0.5, abs=0.01), pytest.approx(0.25, abs=0.01)]  # 30 and 60 days old
        assert (first["metrics"]["weights"]["recency"], later["metrics"]["weights"]["recency"]) == (0.7, 0.3)
        assert contents(other) == ["The release train leaves on Mondays"]


COLOURS = ["red", "blue", "green", "yellow", "grey", "white"]


async def search_plans(db: Database, tenant_id: uuid.UUID) -> list[Any]:
    """The search statements prepared on the connection ``db`` holds (a pool of one): how often
    each was planned generically and per run, most generic first."""
    async with db.tenant_tx(tenant_id) as tx:
        return list(
            (
                await tx.session.execute(
                    text(
                        "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                        "WHERE statement LIKE '%memvault_nearest%' ORDER BY generic_plans DESC"
                    )
                )
            ).all()
        )


class TestOnePlan:
    """An unfiltered search keeps one plan per connection (retrieval/sql/settings.py, plan_cache_mode):
    what depends on a tenant's size is planned per call inside memvault_nearest and
    memvault_word_best, so the kept plan must serve a large tenant and a small one alike."""

    async def test_a_kept_plan_serves_a_large_and_a_small_tenant(
        self, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        filler = [f"Logbook entry {i}: the {c} crate was moved to shelf {i % 17}" for i, c in enumerate(COLOURS * 20)]
        large = await api.store_many(
            tenant_a.principal,
            tenant_a.namespace,
            [MemoryIn(content=c) for c in [*filler, "The lighthouse keeper feeds a one-eyed cat named Pilot"]],
        )
        small = await api.store_many(
            tenant_b.principal, tenant_b.namespace, [MemoryIn(content="Our office cat is called Marmalade")]
        )
        own = {tenant_a.id: {m.id for m in large}, tenant_b.id: {m.id for m in small}}
        # One connection, so that the statement is prepared there and its plan kept.
        db = Database(api._db.urls, pool_size=1)
        facade = NamespaceAPI(db, api._embedder, api._settings)
        try:
            for tenant, expected in [(tenant_a, "Pilot"), (tenant_b, "Marmalade")] * 4:
                out = await facade.search(tenant.principal, tenant.namespace, SearchIn(query="what is the cat called"))
                assert expected in out.results[0].memory.content
                assert {r.memory.id for r in out.results} <= own[tenant.id]
            filtered = await facade.search(
                tenant_b.principal, tenant_b.namespace, SearchIn(query="the cat", filters=MemoryFilters(type=["fact"]))
            )
            assert [r.memory.content for r in filtered.results] == ["Our office cat is called Marmalade"]
            plans = await search_plans(db, tenant_a.id)
        finally:
            await facade.aclose()
            await db.dispose()

        assert plans and plans[0].generic_plans >= 1  # the unfiltered statement: one plan, kept
        assert plans[0].custom_plans == 0

    async def test_the_statement_is_prepared_at_its_first_run(self, api: NamespaceAPI, tenant_a: Tenant) -> None:
        """Not at psycopg's fifth: until then PostgreSQL planned the statement (20-35 ms) at every
        run, on each of the pool's connections (issue 25)."""
        await api.store(tenant_a.principal, tenant_a.namespace, MemoryIn(content="Our office cat is called Marmalade"))
        db = Database(api._db.urls, pool_size=1)
        facade = NamespaceAPI(db, api._embedder, api._settings)
        try:
            out = await facade.search(tenant_a.principal, tenant_a.namespace, SearchIn(query="what is the cat called"))
            plans = await search_plans(db, tenant_a.id)
        finally:
            await facade.aclose()
            await db.dispose()

        assert out.results[0].memory.content == "Our office cat is called Marmalade"
        assert [(p.generic_plans, p.custom_plans) for p in plans] == [(1, 0)]


async def test_a_search_is_never_compiled_to_machine_code(api: NamespaceAPI, tenant_a: Tenant) -> None:
    """PostgreSQL compiles a statement estimated above jit_above_cost, and among a few thousand
    memories the search statement's kept plan is (about 230,000 against 100,000): on a PostgreSQL
    with LLVM every search compiled it, 170-220 ms of CPU for a 7 ms statement (docs/benchmarks.md).
    The search's transaction turns JIT off. The embedded PostgreSQL has no JIT to show the cost, so
    the setting is read in the search's own transaction, right after its statement ran."""
    await api.store(tenant_a.principal, tenant_a.namespace, MemoryIn(content="Our office cat is called Marmalade"))
    seen: list[str] = []

    def read_jit(conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if "lex_inner" in statement:  # the search's statement
            seen.append(conn.exec_driver_sql("SELECT current_setting('jit')").scalar_one())

    engine = api._db.app_engine.sync_engine
    event.listen(engine, "after_cursor_execute", read_jit)
    try:
        out = await api.search(tenant_a.principal, tenant_a.namespace, SearchIn(query="what is the cat called"))
    finally:
        event.remove(engine, "after_cursor_execute", read_jit)
    assert out.results[0].memory.content == "Our office cat is called Marmalade"
    assert seen == ["off"]


async def test_no_tenant_transaction_is_compiled_to_machine_code(api: NamespaceAPI, tenant_a: Tenant) -> None:
    """Not only the search's: a list, a count or an aggregate over a large namespace passes the
    threshold too (db/session.py, TENANT_TX_SETTINGS)."""
    async with api._db.tenant_tx(tenant_a.id) as tx:
        assert (await tx.session.execute(text("SELECT current_setting('jit')"))).scalar_one() == "off"
