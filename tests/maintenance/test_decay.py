"""Decay archives what has gone unused for long (never deletes it); promotion makes reinforced
tentative memories stable. Ages and recall counts are set with owner SQL."""

from __future__ import annotations

from memvault.api import NamespaceAPI
from memvault.memories.schemas import MemoryFilters
from tests.conftest import Tenant
from tests.maintenance.helpers import organize, set_fields, store


async def state(api: NamespaceAPI, t: Tenant, memory_id: object) -> str:
    return (await api.get_memory(t.principal, "default", memory_id)).state.value  # type: ignore[arg-type]


class TestDecay:
    async def test_old_untouched_is_archived_and_recently_used_is_kept(
        self, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        old, old_but_used, fresh = await store(
            api,
            tenant_a,
            {"content": "The user once owned a red bicycle"},
            {"content": "The user's locker code is kept at reception"},
            {"content": "The user is learning Portuguese"},
        )
        # Half-life 30 days: after 200 unused days strength is 0.5 ** (200 / 30) ~ 0.01 < 0.05.
        for m in (old, old_but_used):
            await set_fields(api, m.id, "created_at = now() - interval '200 days'")
        await set_fields(api, old_but_used.id, "last_accessed_at = now() - interval '2 days', access_count = 3")
        (theirs,) = await store(api, tenant_b, {"content": "The user once owned a red bicycle"})
        await set_fields(api, theirs.id, "created_at = now() - interval '200 days'")

        result = await organize(api, tenant_a, "decay")

        assert result["decay"]["archived"] == 1 and result["decay"]["complete"] is True
        assert await state(api, tenant_a, old.id) == "archived"  # kept, only archived
        assert await state(api, tenant_a, old_but_used.id) == "stable"
        assert await state(api, tenant_a, fresh.id) == "stable"
        listed = await api.list_memories(tenant_a.principal, "default", MemoryFilters())
        assert old.id not in {m.id for m in listed.data}
        history = await api.memory_history(tenant_a.principal, "default", old.id)
        assert history.changes[-1].action == "archived"
        # Decay in one tenant leaves another's memories alone.
        assert await state(api, tenant_b, theirs.id) == "stable"

        assert (await organize(api, tenant_a, "decay"))["decay"]["archived"] == 0

    async def test_importance_slows_decay(self, api: NamespaceAPI, tenant_a: Tenant) -> None:
        # After 100 days recency is 0.5 ** (100 / 30) ~ 0.099: times (0.5 + importance).
        minor, normal = await store(
            api,
            tenant_a,
            {"content": "The user mentioned a podcast", "importance": 0.0},
            {"content": "The user mentioned a recipe"},
        )
        for m in (minor, normal):
            await set_fields(api, m.id, "created_at = now() - interval '100 days'")
        assert (await organize(api, tenant_a, "decay"))["decay"]["archived"] == 1
        assert await state(api, tenant_a, minor.id) == "archived"
        assert await state(api, tenant_a, normal.id) == "stable"


class TestPromote:
    async def test_reinforced_tentative_memories_become_stable(self, api: NamespaceAPI, tenant_a: Tenant) -> None:
        mentioned, recalled, once, odd = await store(
            api,
            tenant_a,
            {"content": "The user likes jazz", "state": "tentative", "metadata": {"mentions": 2}},
            {"content": "The user likes chess", "state": "tentative"},
            {"content": "The user likes tea", "state": "tentative", "metadata": {"mentions": 1}},
            {"content": "The user likes rain", "state": "tentative", "metadata": {"mentions": "many"}},
        )
        await set_fields(api, recalled.id, "access_count = 3")
        await set_fields(api, once.id, "access_count = 2")

        result = await organize(api, tenant_a, "promote", "decay")

        assert result["promote"]["promoted"] == 2 and result["decay"]["archived"] == 0
        assert await state(api, tenant_a, mentioned.id) == "stable"
        assert await state(api, tenant_a, recalled.id) == "stable"
        assert await state(api, tenant_a, once.id) == "tentative"
        assert await state(api, tenant_a, odd.id) == "tentative"  # metadata is the caller's: not a count
        history = await api.memory_history(tenant_a.principal, "default", mentioned.id)
        assert history.changes[-1].action == "promoted"

    async def test_memories_reinforced_by_dedup_are_promoted(self, api: NamespaceAPI, tenant_a: Tenant) -> None:
        await store(
            api,
            tenant_a,
            {"content": "The user's cat is called Miso", "state": "tentative"},
            {"content": "the user's cat is called miso", "state": "tentative"},
        )
        result = await organize(api, tenant_a, "dedup", "promote")
        assert result["dedup"]["merged_exact"] == 1 and result["promote"]["promoted"] == 1
