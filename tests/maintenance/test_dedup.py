"""Deduplication: exact copies and paraphrases merge into one representative that keeps their
provenance; different facts that embed close together are all kept."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np

from memvault.api import NamespaceAPI
from memvault.embeddings.local import LocalEmbedder
from memvault.maintenance.schemas import OrganizeIn, Step
from tests.conftest import Tenant
from tests.db.conftest import clone_memory
from tests.jobs.helpers import all_memories
from tests.maintenance.helpers import organize, set_fields, store


def current(mems: list) -> dict[str, object]:
    return {m.content: m for m in mems if m.superseded_at is None}


async def cosine(embedder: LocalEmbedder, a: str, b: str) -> float:
    va, vb = await embedder.embed([a, b])
    return float(np.dot(va, vb) / np.linalg.norm(va) / np.linalg.norm(vb))


class TestExact:
    async def test_same_normalised_text_merges_into_the_best_and_keeps_provenance(
        self, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        e1, e2, e3 = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        first, second, third, other_user = await store(
            api,
            tenant_a,
            {"content": "I prefer window seats", "user_id": "u1", "state": "tentative", "source_event_ids": [e1]},
            # Stable beats tentative, though it is newer.
            {"content": "  i PREFER window   seats ", "user_id": "u1", "source_event_ids": [e2]},
            {
                "content": "I prefer window seats",
                "user_id": "u1",
                "metadata": {"mentions": 2},
                "state": "tentative",
                "source_event_ids": [e3],
            },
            {"content": "I prefer window seats", "user_id": "u2"},
        )
        await store(
            api,
            tenant_b,
            {"content": "I prefer window seats", "user_id": "u1"},
            {"content": "I prefer window seats", "user_id": "u1", "importance": 0.9},
        )

        result = await organize(api, tenant_a, "dedup")

        d = result["dedup"]
        assert d["merged_exact"] == 2 and d["representatives"] == 1 and d["complete"] is True
        mems = await all_memories(api, tenant_a.principal)
        live = [m for m in mems if m.superseded_at is None]
        assert {m.id for m in live} == {second.id, other_user.id}
        rep = next(m for m in live if m.id == second.id)
        assert set(rep.source_event_ids) == {e1, e2, e3}
        assert rep.metadata["mentions"] == 1 + 1 + 2
        assert set(rep.metadata["merged_from"]) == {str(first.id), str(third.id)}
        for dup in (first, third):
            got = await api.get_memory(tenant_a.principal, "default", dup.id)  # superseded, not deleted
            assert got.superseded_by == second.id and got.superseded_at is not None
            history = await api.memory_history(tenant_a.principal, "default", dup.id)
            assert [c.action for c in history.changes if c.memory_id == dup.id][-1] == "merged"
        history = await api.memory_history(tenant_a.principal, "default", second.id)
        assert history.changes[-1].action == "merged"

        # Another tenant's copies are not touched by this tenant's job.
        assert len([m for m in await all_memories(api, tenant_b.principal) if m.superseded_at is None]) == 2

        # Nothing left to do: a second run changes nothing.
        again = await organize(api, tenant_a, "dedup")
        assert again["dedup"]["merged_exact"] == 0 and again["dedup"]["merged_near"] == 0

    async def test_different_type_key_or_valid_time_is_not_the_same_memory(
        self, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        await store(
            api,
            tenant_a,
            {"content": "Dentist appointment", "type": "event", "valid_from": "2024-05-07T00:00:00Z"},
            {"content": "Dentist appointment", "type": "event", "valid_from": "2024-06-07T00:00:00Z"},
            {"content": "Dentist appointment", "type": "task"},
            {"content": "Dentist appointment", "type": "task", "key": "dentist"},
        )
        result = await organize(api, tenant_a, "dedup")
        assert result["dedup"]["merged_exact"] == 0 and result["dedup"]["merged_near"] == 0
        assert len([m for m in await all_memories(api, tenant_a.principal) if m.superseded_at is None]) == 4

    async def test_priority_is_importance_then_recall_then_age(self, api: NamespaceAPI, tenant_a: Tenant) -> None:
        _old, recalled, important = await store(
            api,
            tenant_a,
            {"content": "Ana lives in Porto"},
            {"content": "Ana lives in Porto"},
            {"content": "ana lives in porto", "importance": 0.8},
        )
        await set_fields(api, recalled.id, "access_count = 5")
        await organize(api, tenant_a, "dedup")
        live = [m for m in await all_memories(api, tenant_a.principal) if m.superseded_at is None]
        assert [m.id for m in live] == [important.id]

        a, b = await store(api, tenant_a, {"content": "Kenji climbs"}, {"content": "Kenji climbs"})
        await set_fields(api, b.id, "access_count = 5")
        await organize(api, tenant_a, "dedup")
        assert (await api.get_memory(tenant_a.principal, "default", a.id)).superseded_by == b.id


class TestNear:
    async def test_paraphrases_merge_and_distinct_facts_stay(
        self, api: NamespaceAPI, tenant_a: Tenant, embedder: LocalEmbedder
    ) -> None:
        distinct = [
            ("Ana's flight is on Monday", "Ana's flight is on Tuesday"),
            ("Ana's flight is at 9am", "Ana's flight is at 10am"),
            ("Ana likes olives", "Ana does not like olives"),
        ]
        # These pairs embed closer than the threshold: only the guard keeps them apart.
        for a, b in distinct:
            assert await cosine(embedder, a, b) >= api._settings.dedup_threshold, (a, b)
        cat, named = await store(
            api,
            tenant_a,
            {"content": "The user's cat is called Miso", "user_id": "u1"},
            {"content": "The user's cat is named Miso", "user_id": "u1", "importance": 0.7},
        )
        await store(api, tenant_a, *({"content": text, "user_id": "u1"} for pair in distinct for text in pair))

        result = await organize(api, tenant_a, "dedup")

        d = result["dedup"]
        assert d["merged_near"] == 1 and d["kept_distinct"] >= 3, d
        assert d["kept_distinct_time"] >= 1 and d["kept_distinct_numbers"] >= 1 and d["kept_distinct_negation"] >= 1
        live = current(await all_memories(api, tenant_a.principal))
        assert set(live) == {"The user's cat is named Miso", *(t for pair in distinct for t in pair)}
        assert (await api.get_memory(tenant_a.principal, "default", cat.id)).superseded_by == named.id
        assert live["The user's cat is named Miso"].metadata["merged_from"] == [str(cat.id)]  # type: ignore[attr-defined]

    async def test_threshold_is_configurable(
        self, api: NamespaceAPI, tenant_a: Tenant, embedder: LocalEmbedder
    ) -> None:
        a, b = "Ana prefers aisle seats", "Ana likes sitting in the aisle seat"
        similarity = await cosine(embedder, a, b)
        # Stored one after the other: the older represents two otherwise equal memories.
        stored = [*await store(api, tenant_a, {"content": a}), *await store(api, tenant_a, {"content": b})]

        # Just under the default threshold: kept at 0.92, merged at 0.9.
        assert 0.9 <= similarity < 0.92
        assert (await organize(api, tenant_a, "dedup"))["dedup"]["merged_near"] == 0
        loose = NamespaceAPI(api._db, api._embedder, api._settings.model_copy(update={"dedup_threshold": 0.9}))
        out = await loose.organize(tenant_a.principal, "default", OrganizeIn(jobs=[Step.dedup]))
        outcome = await loose.run_job(tenant_a.principal, out.job_id)
        assert outcome.result["dedup"]["merged_near"] == 1
        live = current(await all_memories(api, tenant_a.principal))
        assert set(live) == {a}
        assert live[a].metadata["merged_from"] == [str(stored[1].id)]  # type: ignore[attr-defined]

    async def test_other_owner_or_type_never_merges(self, api: NamespaceAPI, tenant_a: Tenant) -> None:
        await store(
            api,
            tenant_a,
            {"content": "The user's cat is called Miso", "user_id": "u1"},
            {"content": "The user's cat is named Miso", "user_id": "u2"},
            {"content": "The user's cat is named Miso", "user_id": "u1", "type": "preference"},
            {"content": "The user's cat is named Miso", "session_id": "s1"},
        )
        result = await organize(api, tenant_a, "dedup")
        assert result["dedup"]["merged_near"] == 0 and result["dedup"]["merged_exact"] == 0

    async def test_archived_memories_are_left_alone(self, api: NamespaceAPI, tenant_a: Tenant) -> None:
        a, _b = await store(
            api, tenant_a, {"content": "The user's cat is called Miso"}, {"content": "The user's cat is named Miso"}
        )
        await api.archive_memory(tenant_a.principal, "default", a.id)
        result = await organize(api, tenant_a, "dedup")
        assert result["dedup"]["merged_near"] == 0
        assert (await api.get_memory(tenant_a.principal, "default", a.id)).superseded_at is None


async def near_pairs_both_ways(api: NamespaceAPI, tenant: Tenant) -> tuple[dict[bool, set[Any]], set[Any]]:
    """The near pairs of the tenant's default namespace found by the exact plan (False) and the
    index probe (True), and the last ids each reported."""
    from memvault.maintenance import repository as repo

    found: dict[bool, set[Any]] = {}
    lasts = set()
    for use_index in (False, True):
        async with api._db.tenant_tx(tenant.id) as tx:
            ns = await api._namespace(tx, tenant.principal, "default")
            pairs, last = await repo.near_pairs(
                tx.session,
                tenant.id,
                ns.id,
                model_id=api._embedder.model_id,
                threshold=0.92,
                after=None,
                batch=200,
                use_index=use_index,
            )
        found[use_index] = {(a, b) for a, b, _ in pairs}
        lasts.add(last)
    return found, lasts


class TestNearPairsQuery:
    async def test_index_probe_finds_what_the_exact_plan_finds(self, api: NamespaceAPI, tenant_a: Tenant) -> None:

        stored = await store(
            api,
            tenant_a,
            {"content": "The user's cat is called Miso"},
            {"content": "The user's cat is named Miso"},
            {"content": "Ana's flight is on Monday"},
            {"content": "Ana's flight is on Tuesday"},
            {"content": "The user drinks green tea"},
        )
        found, lasts = await near_pairs_both_ways(api, tenant_a)
        assert lasts == {max(m.id for m in stored)}
        ids = {m.content: m.id for m in stored}
        cat = tuple(sorted([ids["The user's cat is called Miso"], ids["The user's cat is named Miso"]]))
        flight = tuple(sorted([ids["Ana's flight is on Monday"], ids["Ana's flight is on Tuesday"]]))
        assert found[False] == found[True] == {cat, flight}

    async def test_the_index_probe_finds_a_pair_that_other_tenants_copies_cut_off_the_graph(
        self, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        """Another tenant holds a thousand rows of one same vector (the model gives a text the same
        bits every time): their HNSW elements fill each other's neighbour lists, and memories stored
        near them get no link in, so no index scan reaches them, however wide its beam. Dedup on a
        large namespace (the index probe) must still find their pair."""

        (crowd,) = await store(api, tenant_b, {"content": "Priya's ferry to Hydra leaves on Friday"})
        await clone_memory(api, crowd.id, 999)
        stored = await store(
            api,
            tenant_a,
            {"content": "Priya's ferry to Hydra leaves on Monday"},
            {"content": "Priya's ferry to Hydra leaves on Tuesday"},
            {"content": "The user drinks green tea"},
        )
        found, _ = await near_pairs_both_ways(api, tenant_a)
        ferry = tuple(sorted(m.id for m in stored[:2]))
        assert found[False] == found[True] == {ferry}
