"""memvault's main flows on a Citus cluster (issue 26), through the REST API: the same answers as
on single-node PostgreSQL, row-level security holding on the workers, a hard forget leaving
nothing on any shard, and a tenant's statements routed to one node."""

from __future__ import annotations

import json
import re
import uuid

import httpx
import psycopg
from sqlalchemy import event, text

from memvault.api import NamespaceAPI
from memvault.cluster import local
from memvault.memories.schemas import MemoryIn, ScopeLevel
from memvault.principal import Principal
from tests.cluster.conftest import on_every_shard
from tests.conftest import Tenant
from tests.forget.test_router import FORGET, seed
from tests.jobs.helpers import all_memories, wait_for_job
from tests.jobs.test_tasks import events_body, ingest
from tests.memories.test_router import MEMORIES, SEARCH, get, listed, store, store_many
from tests.portability.test_router import DST, SRC, export, normalise

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


def task_counts(
    cluster: local.Cluster, tenant: uuid.UUID, sent: list[tuple[str, object]]
) -> list[tuple[str, str, list[str]]]:
    """Each statement the app sent, planned again under EXPLAIN as the app role with ``tenant``
    set: (the statement, its plan, the Task Count of each distributed scan in it)."""
    out = []
    with psycopg.connect(cluster.coordinator.uri("memvault_app")) as conn:
        conn.execute(f"SET LOCAL app.tenant_id = '{tenant}'")
        cur = psycopg.ClientCursor(conn)
        for statement, params in sent:
            cur.execute("EXPLAIN " + statement, params)  # type: ignore[arg-type]
            plan = "\n".join(line for (line,) in cur.fetchall())
            out.append((statement, plan, re.findall(r"Task Count: (\d+)", plan)))
    return out


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


class TestContext:
    async def test_the_context_block_holds_the_memories_asked_for(
        self, citus_client: httpx.AsyncClient, citus_a: Tenant
    ) -> None:
        await store_many(citus_client, citus_a, FACTS)
        r = await citus_client.post(
            f"{MEMORIES.rsplit('/', 1)[0]}/context", json={"query": "What is Ana allergic to?"}, headers=citus_a.headers
        )
        assert r.status_code == 200, r.text
        assert "Ana is allergic to peanuts" in r.text


class TestPortability:
    async def test_an_export_imported_into_another_namespace_reads_the_same(
        self, citus_client: httpx.AsyncClient, citus_a: Tenant
    ) -> None:
        await store_many(citus_client, citus_a, FACTS[:4])
        r = await citus_client.post("/v1/namespaces", json={"name": "restored"}, headers=citus_a.headers)
        assert r.status_code == 201, r.text
        exported = await export(citus_client, citus_a, SRC)
        body = "\n".join(json.dumps(x) for x in exported)
        r = await citus_client.post(f"{DST}/import", content=body, headers=citus_a.headers)
        assert r.status_code in (200, 201), r.text
        again = await export(citus_client, citus_a, DST)
        assert normalise(again)["memory"] == normalise(exported)["memory"]
        assert len(normalise(again)["memory"]) == 4


class TestJobs:
    async def test_an_extraction_job_runs_and_its_memories_are_found(
        self, citus_inproc: httpx.AsyncClient, citus_api: NamespaceAPI, citus_a: Tenant
    ) -> None:
        out = await ingest(citus_inproc, citus_a, events_body("s-" + uuid.uuid4().hex[:8]))
        job = await wait_for_job(citus_inproc, citus_a.headers, out["job_id"])
        assert job["status"] == "succeeded", job
        assert job["result"]["memories_created"] == 8
        contents = {m.content for m in await all_memories(citus_api, citus_a.principal)}
        assert "My sister Ana lives in Lisbon" in contents
        assert "My sister Ana lives in Lisbon" in await search(citus_inproc, citus_a, "Where does Ana live?")
        # Through the entities extraction linked (entity hops: their own statements, one task each).
        r = await citus_inproc.post(
            SEARCH, json={"query": "Where does Ana's sister live?", "hops": True}, headers=citus_a.headers
        )
        assert r.status_code == 200, r.text


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


class TestSystemRows:
    """The system tenant's shared memories sit on a shard of their own: a tenant's list and search
    read them in a statement of their own (memories/split.py) and show them with the tenant's."""

    async def test_a_tenant_lists_pages_and_finds_the_shared_memories(
        self, citus_api: NamespaceAPI, citus_client: httpx.AsyncClient, citus_a: Tenant, citus_cluster: local.Cluster
    ) -> None:
        operator = Principal.system(citus_a.id, subject="cli", operator=True)
        shared = await citus_api.store(
            operator, "default", MemoryIn(content="Always answer in Norwegian", scope=ScopeLevel.system)
        )
        try:
            mine = await store_many(citus_client, citus_a, ["Ana answers emails in the morning", "Ana likes tea"])
            expected = {str(shared.id), *(m["id"] for m in mine)}
            assert {m["id"] for m in await listed(citus_client, citus_a)} == expected
            # One row a page: the cursor walks both shards' rows, none skipped or repeated.
            seen: list[str] = []
            params: dict[str, object] = {"limit": 1}
            while True:
                r = await citus_client.get(MEMORIES, params=params, headers=citus_a.headers)
                assert r.status_code == 200, r.text
                seen += [m["id"] for m in r.json()["data"]]
                if not r.json().get("next_cursor"):
                    break
                params["cursor"] = r.json()["next_cursor"]
            assert sorted(seen) == sorted(expected) and len(seen) == 3
            hits = await search(citus_client, citus_a, "Which language should answers be in?")
            assert "Always answer in Norwegian" in hits
            assert "Ana answers emails in the morning" in hits
        finally:
            with psycopg.connect(citus_cluster.uri(), autocommit=True) as conn:
                conn.execute("DELETE FROM memories WHERE id = %s", (shared.id,))

    async def test_a_tenant_memory_of_the_same_key_hides_the_shared_one(
        self, citus_api: NamespaceAPI, citus_client: httpx.AsyncClient, citus_a: Tenant, citus_cluster: local.Cluster
    ) -> None:
        # As on one node: the narrower memory of a type and key wins, in a list and in a search.
        operator = Principal.system(citus_a.id, subject="cli", operator=True)
        default = await citus_api.store(
            operator,
            "default",
            MemoryIn(content="Always answer in Norwegian", scope=ScopeLevel.system, key="answer-language"),
        )
        other = await citus_api.store(
            operator, "default", MemoryIn(content="Answers are short and polite", scope=ScopeLevel.system)
        )
        try:
            body = {"content": "Answer in English for this team", "key": "answer-language"}
            r = await citus_client.post(MEMORIES, json=body, headers=citus_a.headers)
            assert r.status_code == 201, r.text
            listed_ids = {m["id"] for m in await listed(citus_client, citus_a)}
            assert listed_ids == {r.json()["id"], str(other.id)}
            hits = await search(citus_client, citus_a, "Which language should answers be in?")
            assert "Answer in English for this team" in hits
            assert "Always answer in Norwegian" not in hits
            assert "Answers are short and polite" in hits
        finally:
            with psycopg.connect(citus_cluster.uri(), autocommit=True) as conn:
                conn.execute("DELETE FROM memories WHERE id = ANY(%s)", ([default.id, other.id],))


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

    async def test_every_statement_the_server_warms_up_is_one_task(
        self, citus_api: NamespaceAPI, citus_cluster: local.Cluster
    ) -> None:
        # The statements of every search shape warm_search builds (unfiltered, as a user, as a user
        # whose chain is small; words, intent, graph and time cues), as the app sends them, each
        # planned again under EXPLAIN: every distributed scan in it is one task on one worker.
        sent: list[tuple[str, object]] = []

        def capture(_c: object, _cur: object, statement: str, params: object, _ctx: object, _many: bool) -> None:
            if statement.lstrip().upper().startswith(("WITH", "SELECT")) and "pg_extension" not in statement:
                sent.append((statement, params))

        engine = citus_api._db.app_engine.sync_engine
        event.listen(engine, "before_cursor_execute", capture)
        try:
            ran = await citus_api.warm_search()
        finally:
            event.remove(engine, "before_cursor_execute", capture)
        assert ran == 96 and len(sent) >= ran, (ran, len(sent))
        for _, plan, tasks in task_counts(citus_cluster, uuid.uuid4(), sent):
            assert tasks and set(tasks) == {"1"}, plan[:2000]

    async def test_a_read_by_id_is_one_task_per_statement(
        self, citus_api: NamespaceAPI, citus_client: httpx.AsyncClient, citus_cluster: local.Cluster, citus_a: Tenant
    ) -> None:
        # GET /memories/{id} for the tenant's own memory (one UPDATE ... RETURNING reads and counts
        # it, naming the tenant alone) and for one it does not hold (then a second statement asks
        # the system tenant's shard for a shared memory): every statement the app sends, planned
        # again under EXPLAIN, is one task on one worker; a read by id never spans two shards.
        mine = await store(citus_client, citus_a, "Ana keeps the harbour logbook")
        sent: list[tuple[str, object]] = []

        def capture(_c: object, _cur: object, statement: str, params: object, _ctx: object, _many: bool) -> None:
            if statement.lstrip().upper().startswith(("WITH", "SELECT", "UPDATE")) and "pg_" not in statement:
                sent.append((statement, params))

        engine = citus_api._db.app_engine.sync_engine
        event.listen(engine, "before_cursor_execute", capture)
        try:
            assert (await get(citus_client, citus_a, mine["id"])).status_code == 200
            assert (await get(citus_client, citus_a, str(uuid.uuid4()))).status_code == 404
        finally:
            event.remove(engine, "before_cursor_execute", capture)
        reads = [(s, p) for s, p in sent if "memories" in s]
        assert len(reads) >= 3, [s for s, _ in sent]
        for statement, plan, tasks in task_counts(citus_cluster, citus_a.id, sent):
            assert set(tasks) <= {"1"} and (tasks or "memories" not in statement), plan[:2000]
