"""Re-embedding after a model change: until it runs, search says so and still answers by words;
afterwards it finds by meaning again."""

from __future__ import annotations

from memvault.api import NamespaceAPI
from memvault.retrieval.schemas import SearchIn
from tests.conftest import Tenant
from tests.maintenance.helpers import organize, owner_sql, store

MISMATCH = "embedding_model_mismatch"


class TestReembed:
    async def test_model_change_is_reported_then_repaired(
        self, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        cat, *_ = await store(
            api,
            tenant_a,
            {"content": "The user's cat is called Miso"},
            {"content": "The user drinks green tea every afternoon"},
            {"content": "The user's car is a blue hatchback"},
        )
        # As if written by another model: another id, and a vector that means nothing to this one.
        await owner_sql(
            api,
            "UPDATE memories SET embedding_model = 'old-model', embedding = array_fill(0.05, ARRAY[384])::vector "
            "WHERE tenant_id = :t",
            t=tenant_a.id,
        )
        await store(api, tenant_b, {"content": "The user's cat is called Miso"})
        p = tenant_a.principal

        before = await api.search(p, "default", SearchIn(query="cat"))
        assert MISMATCH in before.metrics.backend_failures
        assert [r.memory.id for r in before.results] == [cat.id]  # words still find it
        assert before.results[0].signals.dense_rank is None
        by_meaning = await api.search(p, "default", SearchIn(query="pet"))
        assert cat.id not in {r.memory.id for r in by_meaning.results}
        # Another tenant's namespace is not affected.
        theirs = await api.search(tenant_b.principal, "default", SearchIn(query="cat"))
        assert MISMATCH not in theirs.metrics.backend_failures

        result = await organize(api, tenant_a, "reembed")

        r = result["reembed"]
        assert r["reembedded"] == 3 and r["remaining"] == 0 and r["complete"] is True
        assert r["model"] == api._embedder.model_id
        after = await api.search(p, "default", SearchIn(query="pet"))
        assert MISMATCH not in after.metrics.backend_failures
        assert after.results[0].memory.id == cat.id and after.results[0].signals.dense_rank == 1
        assert after.results[0].memory.embedding_model == api._embedder.model_id
        assert (await organize(api, tenant_a, "reembed"))["reembed"]["reembedded"] == 0

    async def test_superseded_and_archived_versions_are_reembedded_too(
        self, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        first, other = await store(
            api,
            tenant_a,
            {"content": "The user lives in Porto", "key": "home"},
            {"content": "The user used to skate"},
        )
        await store(api, tenant_a, {"content": "The user lives in Lisbon", "key": "home"})
        await api.archive_memory(tenant_a.principal, "default", other.id)
        await owner_sql(api, "UPDATE memories SET embedding_model = 'old-model' WHERE tenant_id = :t", t=tenant_a.id)
        # Only what search reads by default counts for the warning...
        await owner_sql(
            api,
            "UPDATE memories SET embedding_model = :m WHERE tenant_id = :t AND superseded_at IS NULL "
            "AND state <> 'archived'",
            t=tenant_a.id,
            m=api._embedder.model_id,
        )
        found = await api.search(tenant_a.principal, "default", SearchIn(query="where does the user live"))
        assert MISMATCH not in found.metrics.backend_failures
        # ...but every version is re-embedded: reads as of a past time use them.
        result = await organize(api, tenant_a, "reembed")
        assert result["reembed"]["reembedded"] == 2
        assert (await api.get_memory(tenant_a.principal, "default", first.id)).embedding_model == api._embedder.model_id
