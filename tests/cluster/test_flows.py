"""memvault's main flows on a Citus cluster (issue 26), through the REST API: the same answers as
on single-node PostgreSQL, row-level security holding on the workers, a hard forget leaving
nothing on any shard, and a tenant's statements routed to one node."""

from __future__ import annotations

import uuid

import httpx
import psycopg
from sqlalchemy import text

from memvault.api import NamespaceAPI
from memvault.cluster import local
from tests.cluster.conftest import on_every_shard
from tests.conftest import Tenant
from tests.forget.test_router import FORGET, seed
from tests.memories.test_router import MEMORIES, SEARCH, get, listed, store, store_many

FACTS = [
    "Ana lives in Oslo and works as a nurse",
    "Ana's brother Tomas plays the cello",
    "The team standup moved to 9:30 on Mondays",
    "Ana is allergic to peanuts",
    "Tomas adopted a grey cat called Smoke",
    "The quarterly report is due on the 15th",
    "Ana prefers green tea over coffee",
    "The office wifi password changes every month",
]
QUESTIONS = ["What does Ana drink?", "Who plays an instrument?", "When is the standup?", "What is Ana allergic to?"]


async def search(client: httpx.AsyncClient, tenant: Tenant, query: str, limit: int = 5) -> list[str]:
    r = await client.post(SEARCH, json={"query": query, "limit": limit}, headers=tenant.headers)
    assert r.status_code == 200, r.text
    return [hit["memory"]["content"] for hit in r.json()["results"]]


class TestSchema:
    def test_tenant_tables_are_distributed_and_co_located(
        self, citus_cluster: local.Cluster, citus_urls: object
    ) -> None:
        with psycopg.connect(citus_cluster.uri()) as conn:
            rows = conn.execute("SELECT table_name::text, citus_table_type, colocation_id FROM citus_tables").fetchall()
        kinds = {t: k for t, k, _ in rows}
        assert kinds["memories"] == kinds["memory_terms"] == kinds["namespaces"] == "distributed"
        assert kinds["tenants"] == kinds["plans"] == "reference"
        assert len({c for t, k, c in rows if k == "distributed"}) == 1, rows


class TestStoreAndSearch:
    async def test_store_batch_and_read_back(self, citus_client: httpx.AsyncClient, citus_a: Tenant) -> None:
        one = await store(citus_client, citus_a, "Ana lives in Oslo")
        many = await store_many(citus_client, citus_a, ["Ana likes tea", "Tomas plays the cello"])
        contents = ["Ana lives in Oslo", "Ana likes tea", "Tomas plays the cello"]
        for stored, content in zip([one, *many], contents, strict=True):
            r = await get(citus_client, citus_a, stored["id"])
            assert r.status_code == 200, r.text
            assert r.json()["content"] == content

    async def test_list(self, citus_client: httpx.AsyncClient, citus_a: Tenant) -> None:
        many = await store_many(citus_client, citus_a, ["Ana likes tea", "Tomas plays the cello"])
        assert {m["id"] for m in await listed(citus_client, citus_a)} == {m["id"] for m in many}

    async def test_search_answers_as_single_node(
        self,
        citus_client: httpx.AsyncClient,
        citus_a: Tenant,
        client: httpx.AsyncClient,
        tenant_a: Tenant,
    ) -> None:
        await store_many(citus_client, citus_a, FACTS)
        await store_many(client, tenant_a, FACTS)
        for q in QUESTIONS:
            assert await search(citus_client, citus_a, q) == await search(client, tenant_a, q), q


class TestVersions:
    async def test_a_new_version_supersedes_and_history_shows_both(
        self, citus_client: httpx.AsyncClient, citus_a: Tenant
    ) -> None:
        v1 = await store(citus_client, citus_a, "Ana lives in Oslo", key="city", user_id="ana")
        v2 = await store(citus_client, citus_a, "Ana lives in Bergen", key="city", user_id="ana")
        old = (await get(citus_client, citus_a, v1["id"])).json()
        assert old["superseded_by"] == v2["id"]
        r = await citus_client.get(f"{MEMORIES}/{v2['id']}/history", headers=citus_a.headers)
        assert r.status_code == 200, r.text
        assert r.text.count("Ana lives in") >= 2, r.text


class TestForget:
    async def test_hard_forget_leaves_nothing_on_any_shard(
        self, citus_client: httpx.AsyncClient, citus_a: Tenant, citus_cluster: local.Cluster
    ) -> None:
        marker = uuid.uuid4().hex
        seeded = await seed(citus_client, citus_a, "ana", "s1", marker)
        where = f"tenant_id = '{citus_a.id}'"
        words = f"{where} AND memory_id = '{seeded['v2']['id']}'"  # the current version's words
        assert on_every_shard(citus_cluster, "memory_terms", words) > 0
        assert on_every_shard(citus_cluster, "memories", f"{where} AND strpos(content, '{marker}') > 0") == 2
        r = await citus_client.post(FORGET, json={"user_id": "ana", "hard": True}, headers=citus_a.headers)
        assert r.status_code == 200, r.text
        for table, column in (
            ("memories", "content"),
            ("memory_history", "snapshot::text"),
            ("events", "content"),
            ("traces", "task"),
            ("trace_steps", "thought"),
        ):
            assert on_every_shard(citus_cluster, table, f"{where} AND strpos({column}, '{marker}') > 0") == 0, table
        assert on_every_shard(citus_cluster, "memory_terms", words) == 0


class TestIsolation:
    async def test_other_tenant_sees_nothing(
        self, citus_client: httpx.AsyncClient, citus_a: Tenant, citus_b: Tenant
    ) -> None:
        mine = await store(citus_client, citus_a, "Ana's locker code is 4417")
        assert (await get(citus_client, citus_b, mine["id"])).status_code == 404
        assert (await get(citus_client, citus_a, mine["id"])).status_code == 200

    async def test_other_tenant_lists_and_finds_nothing(
        self, citus_client: httpx.AsyncClient, citus_a: Tenant, citus_b: Tenant
    ) -> None:
        await store(citus_client, citus_a, "Ana's locker code is 4417")
        assert await listed(citus_client, citus_b) == []
        assert await search(citus_client, citus_b, "locker code") == []

    async def test_without_the_tenant_the_workers_show_nothing(
        self, citus_api: NamespaceAPI, citus_client: httpx.AsyncClient, citus_a: Tenant
    ) -> None:
        # The app role with no tenant set: row-level security on the shards admits no row.
        await store(citus_client, citus_a, "Ana's locker code is 4417")
        async with citus_api._db.unscoped() as s:
            assert await s.scalar(text("SELECT count(*) FROM memories")) == 0


class TestRouting:
    async def test_a_tenant_scoped_search_is_one_task(
        self, citus_api: NamespaceAPI, citus_client: httpx.AsyncClient, citus_a: Tenant
    ) -> None:
        await store_many(citus_client, citus_a, FACTS)
        async with citus_api._db.tenant_tx(citus_a.id) as tx:
            plan = (
                await tx.session.execute(
                    text(
                        "EXPLAIN SELECT id FROM memories WHERE tenant_id = :t AND superseded_at IS NULL "
                        "ORDER BY embedding <=> (SELECT embedding FROM memories WHERE tenant_id = :t LIMIT 1) LIMIT 5"
                    ),
                    {"t": citus_a.id},
                )
            ).scalars()
            lines = list(plan)
        assert any("Task Count: 1" in line for line in lines), "\n".join(lines)
