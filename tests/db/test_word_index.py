"""The lexical channel's word index (memory_terms, migration 0013): kept in step with every write
by triggers, read only through memvault_word_best (and its keyed twin), and never across tenants."""

from __future__ import annotations

import asyncio
import random
import re
import uuid
from collections.abc import Callable

import psycopg
import pytest
from alembic import command
from alembic.config import Config
from psycopg import errors

from memvault.api import NamespaceAPI
from memvault.db import migrate
from memvault.db.urls import DatabaseUrls
from memvault.memories.schemas import MemoryIn, MemoryPatch
from memvault.retrieval.lexical import tsquery_text
from memvault.retrieval.schemas import SearchIn
from tests.conftest import Tenant
from tests.db.conftest import scalar, set_tenant


async def migrating(step: Callable[[Config, str], None], config: Config, revision: str) -> None:
    """An alembic step on a thread of its own. Run on the event loop, it blocks the loop while it
    waits for its locks: a transaction that the app's background work (the access counts' writer,
    say) opened on that loop could then never finish, and the migration would wait forever."""
    await asyncio.to_thread(step, config, revision)


# The keyed functions the search calls (migration 0016): each row's tenant, id and score.
BEST = "SELECT tenant_id, id, score FROM memvault_word_best_keyed(%s, %s, %s, %s::tsquery[], %s, %s, %s)"
TOP = "SELECT tenant_id, id, score FROM memvault_word_top_keyed(%s, %s::tsquery, %s::tsquery[], %s, %s, true, %s)"
# Every match's key, for a search whose filters reject most of the best ones (migration 0017).
MATCHES = "SELECT tenant_id, id FROM memvault_word_matches_keyed(%s, %s)"


async def terms(owner: psycopg.AsyncConnection, memory_id: uuid.UUID) -> dict[str, tuple[uuid.UUID, int]]:
    """The memory's words in the index: lexeme -> (where it is filed, the memory's length)."""
    rows = await (
        await owner.execute("SELECT lexeme, owner_key, doc_len FROM memory_terms WHERE memory_id = %s", (memory_id,))
    ).fetchall()
    return {lexeme: (key, n) for lexeme, key, n in rows}


async def lexemes(owner: psycopg.AsyncConnection, text: str) -> set[str]:
    return set(await scalar(owner, "SELECT tsvector_to_array(to_tsvector('english', %s))", (text,)))


async def namespace_id(owner: psycopg.AsyncConnection, tenant: Tenant) -> uuid.UUID:
    sql = "SELECT id FROM namespaces WHERE tenant_id = %s AND name = %s"
    return await scalar(owner, sql, (tenant.id, tenant.namespace))


class TestKeptInStep:
    async def test_a_stored_memory_is_filed_under_its_namespace(
        self, api: NamespaceAPI, owner_conn: psycopg.AsyncConnection, tenant_a: Tenant
    ) -> None:
        content = "The lighthouse keeper feeds a one-eyed cat named Pilot"
        m = await api.store(tenant_a.principal, tenant_a.namespace, MemoryIn(content=content))
        ns = await namespace_id(owner_conn, tenant_a)

        filed = await terms(owner_conn, m.id)
        words = await lexemes(owner_conn, content)
        assert set(filed) == words
        assert {key for key, _ in filed.values()} == {ns}
        assert {n for _, n in filed.values()} == {len(words)}

    async def test_a_tenant_wide_memory_is_filed_under_its_tenant(
        self, api: NamespaceAPI, owner_conn: psycopg.AsyncConnection, tenant_a: Tenant
    ) -> None:
        m = await api.store(
            tenant_a.principal, tenant_a.namespace, MemoryIn(content="Invoices are due in thirty days", scope="tenant")
        )

        assert {key for key, _ in (await terms(owner_conn, m.id)).values()} == {tenant_a.id}

    async def test_a_corrected_memory_is_found_by_its_new_words_only(
        self, api: NamespaceAPI, owner_conn: psycopg.AsyncConnection, tenant_a: Tenant
    ) -> None:
        p, ns = tenant_a.principal, tenant_a.namespace
        m = await api.store(p, ns, MemoryIn(content="The spare key hides under the geranium pot"))
        await api.store(p, ns, MemoryIn(content="Lunch is at noon on weekdays"))
        await api.update_memory(p, ns, m.id, MemoryPatch(content="The spare key hides inside the mailbox"))

        assert set(await terms(owner_conn, m.id)) == await lexemes(owner_conn, "The spare key hides inside the mailbox")

        async def lexical_rank(query: str) -> int | None:
            out = await api.search(p, ns, SearchIn(query=query))
            return next((r.signals.lexical_rank for r in out.results if r.memory.id == m.id), None)

        assert await lexical_rank("mailbox") == 1
        assert await lexical_rank("geranium") is None

    async def test_archived_leaves_and_promoted_comes_back(
        self, api: NamespaceAPI, owner_conn: psycopg.AsyncConnection, tenant_a: Tenant
    ) -> None:
        p, ns = tenant_a.principal, tenant_a.namespace
        m = await api.store(p, ns, MemoryIn(content="Ana prefers window seats on trains"))
        before = await terms(owner_conn, m.id)

        await api.archive_memory(p, ns, m.id)
        assert await terms(owner_conn, m.id) == {}
        await api.promote_memory(p, ns, m.id)
        assert await terms(owner_conn, m.id) == before

    async def test_a_superseded_version_leaves(
        self, api: NamespaceAPI, owner_conn: psycopg.AsyncConnection, tenant_a: Tenant
    ) -> None:
        p, ns = tenant_a.principal, tenant_a.namespace
        old = await api.store(p, ns, MemoryIn(content="Ana lives in Lisbon", type="fact", key="home_city"))
        new = await api.store(p, ns, MemoryIn(content="Ana lives in Porto", type="fact", key="home_city"))

        assert new.id != old.id
        assert await terms(owner_conn, old.id) == {}
        assert "porto" in await terms(owner_conn, new.id)

    async def test_deleting_a_memory_or_its_namespace_leaves_nothing(
        self, api: NamespaceAPI, owner_conn: psycopg.AsyncConnection, tenant_a: Tenant
    ) -> None:
        p = tenant_a.principal
        gone = await api.store(p, tenant_a.namespace, MemoryIn(content="The boiler was serviced in May"))
        await api.delete_memory(p, tenant_a.namespace, gone.id)
        assert await terms(owner_conn, gone.id) == {}

        from memvault.namespaces.schemas import NamespaceIn

        await api.create_namespace(p, NamespaceIn(name="scratch"))
        kept = await api.store_many(p, "scratch", [MemoryIn(content=f"Scratch note number {i}") for i in range(5)])
        await api.delete_namespace(p, "scratch")
        for m in kept:
            assert await terms(owner_conn, m.id) == {}

    async def test_counting_accesses_leaves_the_index_alone(
        self, api: NamespaceAPI, owner_conn: psycopg.AsyncConnection, tenant_a: Tenant
    ) -> None:
        """Only a change of words, liveness or place rewrites a memory's entries (the trigger's
        WHEN clause): a search's access counts must not."""
        p, ns = tenant_a.principal, tenant_a.namespace
        m = await api.store(p, ns, MemoryIn(content="The telescope lens needs a new cap"))
        versions = "SELECT array_agg(xmin::text ORDER BY lexeme) FROM memory_terms WHERE memory_id = %s"
        before = await (await owner_conn.execute(versions, (m.id,))).fetchone()

        await api.search(p, ns, SearchIn(query="telescope lens"))
        await api.get_memory(p, ns, m.id)  # writes the pending access count with its own
        assert (await api.get_memory(p, ns, m.id)).access_count >= 1
        assert await (await owner_conn.execute(versions, (m.id,))).fetchone() == before

    async def test_the_migration_files_the_memories_already_stored(
        self, api: NamespaceAPI, pg_urls: DatabaseUrls, owner_conn: psycopg.AsyncConnection, tenant_a: Tenant
    ) -> None:
        m = await api.store(tenant_a.principal, tenant_a.namespace, MemoryIn(content="Backups run every night at two"))
        filed = await terms(owner_conn, m.id)
        ns = await namespace_id(owner_conn, tenant_a)
        config = migrate.alembic_config(pg_urls.owner, "memvault_app")
        counts = "SELECT df FROM memvault_word_counts(%s, ARRAY['backup', 'night'], 10) ORDER BY lexeme"

        async def counted() -> list[int]:
            async with owner_conn.transaction():
                await set_tenant(owner_conn, tenant_a)
                return [r[0] for r in await (await owner_conn.execute(counts, (ns,))).fetchall()]

        before = await counted()
        await migrating(command.downgrade, config, "0012")
        try:
            gone = await (await owner_conn.execute("SELECT to_regclass('memory_terms')")).fetchone()
            on_the_full_text_index = await counted()  # the function 0008 made, back in place
        finally:
            await migrating(command.upgrade, config, "head")

        assert gone == (None,)
        assert before == on_the_full_text_index == [1, 1]
        assert filed and await terms(owner_conn, m.id) == filed
        assert await counted() == [1, 1]


class TestWordBest:
    async def test_answers_only_for_the_current_tenant(
        self,
        api: NamespaceAPI,
        app_conn: psycopg.AsyncConnection,
        owner_conn: psycopg.AsyncConnection,
        tenant_a: Tenant,
        tenant_b: Tenant,
    ) -> None:
        for tenant in (tenant_a, tenant_b):
            await api.store(tenant.principal, tenant.namespace, MemoryIn(content=f"{tenant.name} lives in Oslo"))
        ns_a, ns_b = await namespace_id(owner_conn, tenant_a), await namespace_id(owner_conn, tenant_b)
        args = (["oslo"], ["oslo"], ["oslo"], [2.0], 4.0, 10)
        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_a)
            own = await (await app_conn.execute(BEST, (ns_a, *args))).fetchall()
            other = await (await app_conn.execute(BEST, (ns_b, *args))).fetchall()
            top = await (await app_conn.execute(TOP, (ns_a, "oslo", ["oslo"], [2.0], 4.0, 10))).fetchall()
        async with app_conn.transaction():
            nobody = await (await app_conn.execute(BEST, (ns_a, *args))).fetchall()

        assert len(own) == 1 and own == top and own[0][0] == tenant_a.id
        assert other == [] and nobody == []

    async def test_matches_answer_only_for_the_current_tenant(
        self,
        api: NamespaceAPI,
        app_conn: psycopg.AsyncConnection,
        owner_conn: psycopg.AsyncConnection,
        tenant_a: Tenant,
        tenant_b: Tenant,
    ) -> None:
        mine = {}
        for tenant in (tenant_a, tenant_b):
            m = await api.store(tenant.principal, tenant.namespace, MemoryIn(content=f"{tenant.name} lives in Oslo"))
            mine[tenant.id] = m.id
        ns_a, ns_b = await namespace_id(owner_conn, tenant_a), await namespace_id(owner_conn, tenant_b)
        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_a)
            own = await (await app_conn.execute(MATCHES, (ns_a, ["oslo"]))).fetchall()
            other = await (await app_conn.execute(MATCHES, (ns_b, ["oslo"]))).fetchall()
        async with app_conn.transaction():
            nobody = await (await app_conn.execute(MATCHES, (ns_a, ["oslo"]))).fetchall()

        assert own == [(tenant_a.id, mine[tenant_a.id])]
        assert other == [] and nobody == []

    async def test_matches_are_what_best_reads_without_a_limit(
        self,
        api: NamespaceAPI,
        app_conn: psycopg.AsyncConnection,
        owner_conn: psycopg.AsyncConnection,
        tenant_a: Tenant,
    ) -> None:
        rng = random.Random(11)
        vocabulary = ["amber", "basil", "cedar", "dune", "ember", "fjord", "grove", "harbor"]
        texts = [" ".join(rng.sample(vocabulary, rng.randint(1, 3))) for _ in range(40)]
        await api.store_many(tenant_a.principal, tenant_a.namespace, [MemoryIn(content=t) for t in texts])
        await api.store(tenant_a.principal, tenant_a.namespace, MemoryIn(content="amber and basil", key="colours"))
        await api.store(tenant_a.principal, tenant_a.namespace, MemoryIn(content="cedar instead", key="colours"))
        ns = await namespace_id(owner_conn, tenant_a)
        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_a)
            for picking in (["amber"], ["basil", "cedar"], ["dune", "ember", "fjord", "grove"]):
                each = [tsquery_text(w) for w in picking]
                best = await (
                    await app_conn.execute(BEST, (ns, picking, picking, each, [1.0] * len(picking), 3.0, None))
                ).fetchall()
                matches = await (await app_conn.execute(MATCHES, (ns, picking))).fetchall()

                # Live memories only: the superseded "amber and basil" is in neither.
                assert matches and sorted(matches) == sorted((tenant, i) for tenant, i, _ in best)
                assert len(matches) == len(set(matches))

    async def test_the_unkeyed_functions_are_gone_and_a_downgrade_makes_them_again(
        self, pg_urls: DatabaseUrls, owner_conn: psycopg.AsyncConnection
    ) -> None:
        """memvault_word_best, memvault_word_top and memvault_nearest served the release before
        migration 0016 and are dropped by 0019. Its downgrade makes them again from 0016's keyed
        bodies: they must come back exactly as 0015 left them (definition, grants, row estimate)."""
        config = migrate.alembic_config(pg_urls.owner, "memvault_app")
        names = ["memvault_word_best", "memvault_word_top", "memvault_nearest"]
        defined = (
            "SELECT p.proname, pg_get_functiondef(p.oid), p.proacl::text, p.prorows FROM pg_proc p "
            "WHERE p.proname = ANY(%s) AND p.pronamespace = current_schema()::regnamespace ORDER BY 1"
        )

        async def definitions() -> list[tuple[str, str, str, float]]:
            return list(await (await owner_conn.execute(defined, (names,))).fetchall())

        at_head = await definitions()
        try:
            await migrating(command.downgrade, config, "0015")
            as_0015_left_them = await definitions()
            await migrating(command.upgrade, config, "head")
            dropped = await definitions()
            await migrating(command.downgrade, config, "0018")
            made_again = await definitions()
        finally:
            await migrating(command.upgrade, config, "head")

        assert at_head == dropped == []
        assert [name for name, *_ in as_0015_left_them] == sorted(names)
        assert made_again == as_0015_left_them

    async def test_only_the_triggers_write_the_index(
        self,
        api: NamespaceAPI,
        app_conn: psycopg.AsyncConnection,
        owner_conn: psycopg.AsyncConnection,
        tenant_a: Tenant,
    ) -> None:
        m = await api.store(tenant_a.principal, tenant_a.namespace, MemoryIn(content="Ana collects blue stamps"))
        ns = await namespace_id(owner_conn, tenant_a)
        for statement, args in [
            ("INSERT INTO memory_terms VALUES (%s, %s, 'forged', %s, 1)", (tenant_a.id, ns, m.id)),
            ("DELETE FROM memory_terms WHERE memory_id = %s", (m.id,)),
            ("UPDATE memory_terms SET doc_len = 99 WHERE memory_id = %s", (m.id,)),
        ]:
            with pytest.raises(errors.InsufficientPrivilege):
                async with app_conn.transaction():
                    await set_tenant(app_conn, tenant_a)
                    await app_conn.execute(statement, args)

        assert set(await terms(owner_conn, m.id)) == await lexemes(owner_conn, "Ana collects blue stamps")

    async def test_ranks_as_word_top_does(
        self,
        api: NamespaceAPI,
        app_conn: psycopg.AsyncConnection,
        owner_conn: psycopg.AsyncConnection,
        tenant_a: Tenant,
    ) -> None:
        """Within 4x its limit the word index finds every row the full-text index does, and
        scores each on every query word: common words (here 'red'), which pick nothing, still
        lift the rows that have them."""
        rng = random.Random(7)
        vocabulary = ["amber", "basil", "cedar", "dune", "ember", "fjord", "grove", "harbor", "iris", "jade"]
        texts = [" ".join(rng.sample(vocabulary, rng.randint(1, 4)) + ["red"] * rng.randint(0, 1)) for _ in range(60)]
        await api.store_many(tenant_a.principal, tenant_a.namespace, [MemoryIn(content=t) for t in texts])
        ns = await namespace_id(owner_conn, tenant_a)
        rows = [(await lexemes(owner_conn, t)) for t in texts]
        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_a)
            for picking in (["amber"], ["basil", "cedar"], ["dune", "ember", "fjord"]):
                words = sorted({*picking, "red"})
                idf = [1.0 + len(w) / 3 for w in words]
                matches = sum(1 for r in rows if r & set(picking))
                limit = max(1, matches // 4 + 1)  # the word index reads 4 x limit of the picked rows
                each = [tsquery_text(w) for w in words]
                best = await (await app_conn.execute(BEST, (ns, picking, words, each, idf, 5.0, limit))).fetchall()
                top = await (
                    await app_conn.execute(TOP, (ns, tsquery_text(*picking), each, idf, 5.0, limit))
                ).fetchall()
                assert [key for *key, _ in best] == [key for *key, _ in top]
                assert [s for *_, s in best] == pytest.approx([s for *_, s in top])
                assert len(best) == limit

    async def test_without_statistics_each_match_is_read_by_its_key(
        self, owner_conn: psycopg.AsyncConnection, tenant_a: Tenant
    ) -> None:
        """Until autovacuum analyzes them after a first import, the planner knows nothing of the
        tables but their size on disk: each word's range of memory_terms and each match's row of
        memories must still be one key lookup (migration 0014), not a scan of the tenant's rows
        per match."""
        ns = await namespace_id(owner_conn, tenant_a)
        body = await scalar(owner_conn, "SELECT prosrc FROM pg_proc WHERE proname = 'memvault_word_best_keyed'")
        params = ["p_namespace", "p_picking", "p_words", "p_lexemes", "p_idf", "p_avg_len", "p_limit"]
        for i, name in enumerate(params, 1):
            body = re.sub(rf"\b{name}\b", f"${i}", body)
        tables = "('memories'::regclass, 'memory_terms'::regclass)"
        async with owner_conn.transaction():
            # An import of 3,000 memories, then the tables' statistics forgotten: for this
            # transaction only.
            await owner_conn.execute(
                "INSERT INTO memories (tenant_id, namespace_id, type, content, scope, content_hash, created_by) "
                "SELECT %s, %s, 'fact', 'Oslo note ' || g, 'namespace', md5(g::text), 'import' "
                "FROM generate_series(1, 3000) AS g",
                (tenant_a.id, ns),
            )
            await owner_conn.execute(f"DELETE FROM pg_statistic WHERE starelid IN {tables}")
            await owner_conn.execute(f"UPDATE pg_class SET reltuples = -1, relpages = 0 WHERE oid IN {tables}")
            await set_tenant(owner_conn, tenant_a)
            await owner_conn.execute(
                f"PREPARE best_body (uuid, text[], text[], tsquery[], float8[], float8, integer) AS {body}"
            )
            cur = psycopg.AsyncClientCursor(owner_conn)
            await cur.execute(
                "EXPLAIN EXECUTE best_body (%s::uuid, %s::text[], %s::text[], %s::text[]::tsquery[], "
                "%s::float8[], %s::float8, %s::integer)",
                (ns, ["oslo"], ["oslo", "rain"], ["'oslo'", "'rain'"], [2.0, 1.0], 4.0, 100),
            )
            plan = "\n".join(row[0] for row in await cur.fetchall())
            await owner_conn.execute("DEALLOCATE best_body")
            raise psycopg.Rollback()

        assert re.search(r"Index Scan using pk_memories on memories.*\n.*Index Cond: .*id = t\.memory_id", plan)
        assert re.search(r"pk_memory_terms.*\n.*Index Cond: .*lexeme = ", plan)
