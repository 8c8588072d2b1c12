"""Row-level security, checked from a raw connection as the app role: the second lock behind the
repositories' own tenant filters, so it must hold even for SQL that forgets to filter."""

from __future__ import annotations

import math
import uuid
from typing import Any

import psycopg
import pytest
from psycopg import errors
from sqlalchemy import event, text

from memvault.api import NamespaceAPI
from memvault.contradictions.schemas import ContradictionIn
from memvault.db.session import Database, set_local_sql
from memvault.db.urls import DatabaseUrls
from memvault.entities.schemas import EntityIn, RelationIn
from memvault.events.schemas import EventsIn, MessageIn
from memvault.keys import tokens
from memvault.keys.schemas import KeyRotateIn
from memvault.memories.schemas import MemoryIn, ScopeLevel
from memvault.principal import Principal
from tests.conftest import Tenant
from tests.db.conftest import conninfo, scalar, set_tenant

TABLES = (
    "tenants",
    "namespaces",
    "api_keys",
    "memories",
    "memory_terms",
    "audit_log",
    "memory_history",
    "events",
    "sessions",
    "jobs",
    "entities",
    "relations",
    "memory_entities",
    "traces",
    "trace_steps",
    "idempotency_keys",
    "oauth_users",
    "oauth_codes",
    "oauth_grants",
    "oauth_refresh_tokens",
    "oauth_spent_tickets",
    "member_invitations",
    "usage_hourly",
    "observations",
    "contradictions",
    "web_sessions",
    "webhook_endpoints",
    "webhook_deliveries",
)
TENANT_COLUMN = {table: "tenant_id" for table in TABLES} | {"tenants": "id"}

# A harmless change per table the app role may write, to show RLS hides the other tenant's rows from it.
UPDATES = {
    "namespaces": "UPDATE namespaces SET description = 'hijacked' WHERE tenant_id = %s",
    "api_keys": "UPDATE api_keys SET revoked_at = now() WHERE tenant_id = %s",
    "memories": "UPDATE memories SET content = 'hijacked' WHERE tenant_id = %s",
}
DELETES = {table: f"DELETE FROM {table} WHERE tenant_id = %s" for table in UPDATES}


@pytest.fixture
async def data(api: NamespaceAPI, pg_urls: DatabaseUrls, tenant_a: Tenant, tenant_b: Tenant) -> None:
    """Rows for both tenants in every table: a tenant, namespace, key, audit entries, memories with
    history, a conversation with its job, a small entity graph linked to a memory, and a trace."""
    for tenant in (tenant_a, tenant_b):
        p = tenant.principal
        stored = await api.store_many(
            p,
            "default",
            [MemoryIn(content=f"{tenant.name} likes green tea"), MemoryIn(content=f"{tenant.name} lives in Oslo")],
        )
        await api.ingest_events(
            p, "default", EventsIn(session_id="s1", messages=[MessageIn(role="user", content="hello there")])
        )
        ana = await api.create_entity(p, "default", EntityIn(name="Ana", type="person"))
        oslo = await api.create_entity(p, "default", EntityIn(name="Oslo", type="location"))
        await api.create_relation(p, "default", RelationIn(source_id=ana.id, type="lives_in", target_id=oslo.id))
        await api.link_entities(p, "default", stored[1].id, [ana.id, oslo.id])
        await api.mark_contradiction(
            p, "default", ContradictionIn(memory_id=stored[0].id, other_id=stored[1].id, note="planted")
        )
        # Traces and idempotency keys are written as the owner here: only their tenant column matters to these tests.
        async with await psycopg.AsyncConnection.connect(conninfo(pg_urls.owner), autocommit=True) as owner:
            ns_id = await scalar(owner, "SELECT id FROM namespaces WHERE tenant_id = %s", (tenant.id,))
            trace = await scalar(
                owner,
                "INSERT INTO traces (tenant_id, namespace_id, task, created_by) VALUES (%s, %s, 'tidy up', 't') "
                "RETURNING id",
                (tenant.id, ns_id),
            )
            await owner.execute(
                "INSERT INTO trace_steps (tenant_id, trace_id, seq, thought) VALUES (%s, %s, 1, 'start')",
                (tenant.id, trace),
            )
            await owner.execute(
                "INSERT INTO idempotency_keys (tenant_id, key, subject, method, path, request_hash) "
                "VALUES (%s, 'k1', 't', 'POST', '/v1/namespaces/default/memories', 'h')",
                (tenant.id,),
            )
            # OAuth: a user who granted a (global) client access, with a code and a refresh token.
            client = f"mvc_{uuid.uuid4().hex}"
            await owner.execute(
                "INSERT INTO oauth_clients (client_id, kind, redirect_uris, grant_types) "
                "VALUES (%s, 'dcr', '{http://127.0.0.1/cb}', '{authorization_code}')",
                (client,),
            )
            user = await scalar(
                owner,
                "INSERT INTO oauth_users (tenant_id, email, password_hash) VALUES (%s, %s, 'x') RETURNING id",
                (tenant.id, f"{uuid.uuid4().hex}@example.com"),
            )
            grant = await scalar(
                owner,
                "INSERT INTO oauth_grants (tenant_id, user_id, client_id, scopes, namespaces, resource) "
                "VALUES (%s, %s, %s, '{read}', '{default}', 'http://x/mcp') RETURNING id",
                (tenant.id, user, client),
            )
            await owner.execute(
                "INSERT INTO oauth_codes (tenant_id, code_hash, user_id, client_id, redirect_uri, code_challenge, "
                "scopes, namespaces, resource, expires_at) "
                "VALUES (%s, %s, %s, %s, 'http://127.0.0.1/cb', 'c', '{read}', '{default}', 'http://x/mcp', now())",
                (tenant.id, uuid.uuid4().hex, user, client),
            )
            await owner.execute(
                "INSERT INTO oauth_refresh_tokens (tenant_id, grant_id, token_hash, expires_at) "
                "VALUES (%s, %s, %s, now())",
                (tenant.id, grant, uuid.uuid4().hex),
            )
            await owner.execute(
                "INSERT INTO oauth_spent_tickets (tenant_id, ticket_id, expires_at) VALUES (%s, %s, now())",
                (tenant.id, uuid.uuid4().hex),
            )
            endpoint = await scalar(
                owner,
                "INSERT INTO webhook_endpoints (tenant_id, url, events, secret, created_by) "
                "VALUES (%s, 'https://hooks.example/in', '{memory.created}', 'whsec_x', 't') RETURNING id",
                (tenant.id,),
            )
            await owner.execute(
                "INSERT INTO webhook_deliveries (tenant_id, endpoint_id, message_id, event_type, payload) "
                "VALUES (%s, %s, %s, 'memory.created', '{}')",
                (tenant.id, endpoint, f"msg_{uuid.uuid4().hex}"),
            )
            await owner.execute(
                "INSERT INTO web_sessions (tenant_id, user_id, token_hash, expires_at) "
                "VALUES (%s, %s, %s, now() + interval '1 hour')",
                (tenant.id, user, uuid.uuid4().bytes),
            )
            await owner.execute(
                "INSERT INTO member_invitations (tenant_id, email, role, invited_by, expires_at) "
                "VALUES (%s, %s, 'member', 'test', now() + interval '1 day')",
                (tenant.id, f"{uuid.uuid4().hex}@example.com"),
            )
            await owner.execute(
                "INSERT INTO observations (tenant_id, namespace_id, session_id, summary, observed_by, message_count, "
                "last_event_at) VALUES (%s, %s, 's1', 'a greeting', 'rules', 1, now())",
                (tenant.id, ns_id),
            )
            await owner.execute(
                "INSERT INTO usage_hourly (tenant_id, hour, door, operation, requests) "
                "VALUES (%s, date_trunc('hour', now(), 'UTC'), 'rest', 'search', 1)",
                (tenant.id,),
            )
    # The calls above were metered: flushed now, or the meter's next flush (every 2 s) adds usage
    # rows for these tenants while a test is counting them.
    await api._usage.flush()


async def rows_of(conn: psycopg.AsyncConnection, table: str, tenant: Tenant) -> int:
    return int(await scalar(conn, f"SELECT count(*) FROM {table} WHERE {TENANT_COLUMN[table]} = %s", (tenant.id,)))


@pytest.mark.usefixtures("data")
class TestNoTenantSet:
    @pytest.mark.parametrize("table", TABLES)
    async def test_sees_no_rows(
        self,
        app_conn: psycopg.AsyncConnection,
        owner_conn: psycopg.AsyncConnection,
        tenant_a: Tenant,
        table: str,
    ) -> None:
        assert await rows_of(owner_conn, table, tenant_a) > 0

        assert await scalar(app_conn, f"SELECT count(*) FROM {table}") == 0

    @pytest.mark.parametrize("table", TABLES)
    async def test_sees_no_rows_inside_a_transaction(self, app_conn: psycopg.AsyncConnection, table: str) -> None:
        async with app_conn.transaction():
            assert await scalar(app_conn, f"SELECT count(*) FROM {table}") == 0

    async def test_an_empty_setting_matches_nothing(self, app_conn: psycopg.AsyncConnection) -> None:
        async with app_conn.transaction():
            await app_conn.execute("SELECT set_config('app.tenant_id', '', true)")

            assert await scalar(app_conn, "SELECT count(*) FROM memories") == 0

    async def test_cannot_insert(self, app_conn: psycopg.AsyncConnection, tenant_a: Tenant) -> None:
        with pytest.raises(errors.InsufficientPrivilege, match="row-level security"):
            await app_conn.execute("INSERT INTO namespaces (tenant_id, name) VALUES (%s, 'planted')", (tenant_a.id,))


@pytest.mark.usefixtures("data")
class TestTenantSet:
    @pytest.mark.parametrize("table", TABLES)
    async def test_sees_exactly_its_own_rows(
        self,
        app_conn: psycopg.AsyncConnection,
        owner_conn: psycopg.AsyncConnection,
        tenant_a: Tenant,
        tenant_b: Tenant,
        table: str,
    ) -> None:
        expected = await rows_of(owner_conn, table, tenant_a)
        assert await rows_of(owner_conn, table, tenant_b) > 0

        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_a)

            assert await rows_of(app_conn, table, tenant_a) == expected > 0
            assert await rows_of(app_conn, table, tenant_b) == 0
            # Unfiltered, too: every other tenant in the database stays hidden.
            assert await scalar(app_conn, f"SELECT count(*) FROM {table}") == expected

    @pytest.mark.parametrize("table", sorted(UPDATES))
    async def test_cannot_update_the_other_tenants_rows(
        self,
        app_conn: psycopg.AsyncConnection,
        owner_conn: psycopg.AsyncConnection,
        tenant_a: Tenant,
        tenant_b: Tenant,
        table: str,
    ) -> None:
        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_a)
            cur = await app_conn.execute(UPDATES[table], (tenant_b.id,))

            assert cur.rowcount == 0
        hijacked = {
            "namespaces": "SELECT count(*) FROM namespaces WHERE tenant_id = %s AND description = 'hijacked'",
            "api_keys": "SELECT count(*) FROM api_keys WHERE tenant_id = %s AND revoked_at IS NOT NULL",
            "memories": "SELECT count(*) FROM memories WHERE tenant_id = %s AND content = 'hijacked'",
        }[table]
        assert await scalar(owner_conn, hijacked, (tenant_b.id,)) == 0

    @pytest.mark.parametrize("table", sorted(DELETES))
    async def test_cannot_delete_the_other_tenants_rows(
        self,
        app_conn: psycopg.AsyncConnection,
        owner_conn: psycopg.AsyncConnection,
        tenant_a: Tenant,
        tenant_b: Tenant,
        table: str,
    ) -> None:
        before = await rows_of(owner_conn, table, tenant_b)

        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_a)
            cur = await app_conn.execute(DELETES[table], (tenant_b.id,))

            assert cur.rowcount == 0
        assert await rows_of(owner_conn, table, tenant_b) == before > 0

    @pytest.mark.parametrize("table", ["namespaces", "api_keys", "memories", "audit_log"])
    async def test_cannot_insert_a_row_for_the_other_tenant(
        self,
        app_conn: psycopg.AsyncConnection,
        owner_conn: psycopg.AsyncConnection,
        tenant_a: Tenant,
        tenant_b: Tenant,
        table: str,
    ) -> None:
        b_namespace = await scalar(owner_conn, "SELECT id FROM namespaces WHERE tenant_id = %s", (tenant_b.id,))
        key = tokens.new_key()
        insert, params = {
            "namespaces": ("INSERT INTO namespaces (tenant_id, name) VALUES (%s, 'planted')", ()),
            "api_keys": (
                "INSERT INTO api_keys (tenant_id, prefix, secret_hash, scopes) VALUES (%s, %s, %s, '{admin}')",
                (tokens.lookup_prefix(key), tokens.hash_key(key)),
            ),
            "memories": (
                "INSERT INTO memories (tenant_id, namespace_id, type, content, content_hash, created_by) "
                "VALUES (%s, %s, 'fact', 'planted', 'x', 'attacker')",
                (b_namespace,),
            ),
            "audit_log": ("INSERT INTO audit_log (tenant_id, actor, action) VALUES (%s, 'attacker', 'forged')", ()),
        }[table]
        before = await rows_of(owner_conn, table, tenant_b)

        with pytest.raises(errors.InsufficientPrivilege, match="row-level security"):
            async with app_conn.transaction():
                await set_tenant(app_conn, tenant_a)
                await app_conn.execute(insert, (tenant_b.id, *params))

        assert await rows_of(owner_conn, table, tenant_b) == before

    @pytest.mark.parametrize("table", sorted(UPDATES))
    async def test_cannot_move_its_rows_to_the_other_tenant(
        self, app_conn: psycopg.AsyncConnection, tenant_a: Tenant, tenant_b: Tenant, table: str
    ) -> None:
        with pytest.raises(errors.InsufficientPrivilege, match="row-level security"):
            async with app_conn.transaction():
                await set_tenant(app_conn, tenant_a)
                await app_conn.execute(
                    f"UPDATE {table} SET tenant_id = %s WHERE tenant_id = %s", (tenant_b.id, tenant_a.id)
                )

    async def test_can_write_its_own_rows(self, app_conn: psycopg.AsyncConnection, tenant_a: Tenant) -> None:
        # The policies must not lock the tenant out of its own data.
        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_a)
            cur = await app_conn.execute(
                "UPDATE namespaces SET description = 'renamed' WHERE tenant_id = %s", (tenant_a.id,)
            )

            assert cur.rowcount == 1


@pytest.mark.usefixtures("data")
class TestSettingIsTransactionLocal:
    async def test_next_transaction_on_the_same_connection_sees_nothing(
        self, app_conn: psycopg.AsyncConnection, tenant_a: Tenant
    ) -> None:
        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_a)
            assert await scalar(app_conn, "SELECT count(*) FROM memories") > 0

        async with app_conn.transaction():
            assert await scalar(app_conn, "SELECT current_setting('app.tenant_id', true)") in ("", None)
            for table in TABLES:
                assert await scalar(app_conn, f"SELECT count(*) FROM {table}") == 0, table

    async def test_nothing_leaks_after_a_rollback(self, app_conn: psycopg.AsyncConnection, tenant_a: Tenant) -> None:
        class Abort(Exception):
            pass

        with pytest.raises(Abort):
            async with app_conn.transaction():
                await set_tenant(app_conn, tenant_a)
                raise Abort

        assert await scalar(app_conn, "SELECT count(*) FROM memories") == 0

    async def test_next_transaction_sees_only_the_next_tenant(
        self, app_conn: psycopg.AsyncConnection, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_a)

        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_b)

            assert await rows_of(app_conn, "memories", tenant_a) == 0
            assert await rows_of(app_conn, "memories", tenant_b) == 2


class TestTenantTransactionSettings:
    async def test_extra_settings_hold_for_that_transaction_only(self, pg_urls: DatabaseUrls, tenant_a: Tenant) -> None:
        # One pooled connection, so the second transaction runs on the first one's connection.
        db = Database(pg_urls, pool_size=1)
        shown = "SELECT current_setting('app.tenant_id', true), current_setting('synchronous_commit')"
        try:
            async with db.tenant_tx(tenant_a.id, settings={"synchronous_commit": "off"}) as tx:
                assert tuple((await tx.session.execute(text(shown))).one()) == (str(tenant_a.id), "off")
                assert await tx.session.scalar(text("SELECT count(*) FROM namespaces")) > 0
            async with db.unscoped() as s:
                assert tuple((await s.execute(text(shown))).one()) in (("", "on"), (None, "on"))
                assert await s.scalar(text("SELECT count(*) FROM namespaces")) == 0
        finally:
            await db.dispose()

    async def test_a_value_that_is_not_plain_is_refused(self, pg_urls: DatabaseUrls, tenant_a: Tenant) -> None:
        # SET LOCAL takes no bound parameter: the value is written into the statement, so one that
        # could close its quote never reaches the server.
        db = Database(pg_urls, pool_size=1)
        try:
            with pytest.raises(ValueError, match="refusing"):
                async with db.tenant_tx(tenant_a.id, settings={"application_name": "x'; RESET ROLE; --"}):
                    pass
            with pytest.raises(ValueError, match="refusing"):
                async with db.tenant_tx(tenant_a.id, settings={"app.x = 1; RESET ROLE; SET a.b": "1"}):
                    pass
            async with db.tenant_tx(tenant_a.id) as tx:
                assert await tx.session.scalar(text("SELECT current_user")) == "memvault_app"
        finally:
            await db.dispose()

    async def test_the_tenant_setting_is_never_prepared(self, pg_urls: DatabaseUrls, tenant_a: Tenant) -> None:
        # Its text differs per tenant: prepared (psycopg does so after 5 uses of one text), each
        # tenant's would take a place among the connection's 100 prepared statements.
        db = Database(pg_urls, pool_size=1)
        shown = "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE 'SET LOCAL%'"
        try:
            for _ in range(8):
                async with db.tenant_tx(tenant_a.id) as tx:
                    assert await tx.session.scalar(text("SELECT count(*) FROM namespaces")) == 1
            async with db.tenant_tx(tenant_a.id) as tx:
                assert await tx.session.scalar(text(shown)) == 0
        finally:
            await db.dispose()

    def test_every_setting_is_a_set_local_in_one_query(self) -> None:
        # SET LOCAL, not set_config(): only the former reaches Citus' workers (tests/cluster).
        sql = set_local_sql({"app.tenant_id": "6f1c0d3e-0000-4000-8000-000000000001", "hnsw.ef_search": "64"})
        assert sql == (
            "SET LOCAL app.tenant_id = '6f1c0d3e-0000-4000-8000-000000000001'; SET LOCAL hnsw.ef_search = '64'"
        )


class TestAppRole:
    async def test_is_the_app_role(self, app_conn: psycopg.AsyncConnection) -> None:
        assert await scalar(app_conn, "SELECT current_user") == "memvault_app"

    async def test_is_neither_superuser_nor_bypassrls(self, app_conn: psycopg.AsyncConnection) -> None:
        cur = await app_conn.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")

        assert await cur.fetchone() == (False, False)

    async def test_owns_no_tables(self, app_conn: psycopg.AsyncConnection) -> None:
        # An owner is exempt from its tables' policies (unless FORCE ROW LEVEL SECURITY).
        cur = await app_conn.execute("SELECT tablename FROM pg_tables WHERE tableowner = current_user")
        assert await cur.fetchall() == []

        cur = await app_conn.execute(
            "SELECT tablename, tableowner FROM pg_tables WHERE tablename = ANY(%s)", (list(TABLES),)
        )
        owners = dict(await cur.fetchall())
        assert sorted(owners) == sorted(TABLES)
        assert "memvault_app" not in owners.values()

    async def test_every_table_with_a_tenant_column_is_covered(self, app_conn: psycopg.AsyncConnection) -> None:
        # A new tenant table fails here until it has RLS and is added to TABLES (and so to every test above).
        cur = await app_conn.execute(
            "SELECT c.relname, c.relrowsecurity FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid "
            "WHERE c.relkind = 'r' AND a.attname = 'tenant_id' AND c.relnamespace = 'public'::regnamespace"
        )
        found = dict(await cur.fetchall())
        assert sorted(found) == sorted(set(TABLES) - {"tenants"})
        assert all(found.values())

    async def test_row_level_security_is_enabled_on_every_table(self, app_conn: psycopg.AsyncConnection) -> None:
        cur = await app_conn.execute(
            "SELECT relname, relrowsecurity FROM pg_class WHERE relkind = 'r' AND relname = ANY(%s)", (list(TABLES),)
        )

        assert dict(await cur.fetchall()) == dict.fromkeys(TABLES, True)

    @pytest.mark.usefixtures("data")
    @pytest.mark.parametrize(
        "statement",
        [
            "UPDATE audit_log SET actor = 'someone else'",
            "DELETE FROM audit_log",
            "TRUNCATE audit_log",
        ],
        ids=["update", "delete", "truncate"],
    )
    async def test_audit_log_is_append_only(
        self,
        app_conn: psycopg.AsyncConnection,
        owner_conn: psycopg.AsyncConnection,
        tenant_a: Tenant,
        statement: str,
    ) -> None:
        before = await rows_of(owner_conn, "audit_log", tenant_a)

        # Even inside its own tenant: this is a missing grant, not a policy.
        with pytest.raises(errors.InsufficientPrivilege, match="permission denied"):
            async with app_conn.transaction():
                await set_tenant(app_conn, tenant_a)
                await app_conn.execute(statement)

        assert await rows_of(owner_conn, "audit_log", tenant_a) == before

    @pytest.mark.parametrize(
        "statement",
        [
            "INSERT INTO tenants (name) VALUES ('planted')",
            "UPDATE tenants SET plan = 'enterprise'",
            "DELETE FROM tenants",
        ],
        ids=["insert", "update", "delete"],
    )
    async def test_tenants_are_read_only(
        self, app_conn: psycopg.AsyncConnection, tenant_a: Tenant, statement: str
    ) -> None:
        with pytest.raises(errors.InsufficientPrivilege, match="permission denied"):
            async with app_conn.transaction():
                await set_tenant(app_conn, tenant_a)
                await app_conn.execute(statement)


class TestKeyLookupFunction:
    """The one deliberate way past RLS: it finds a key by its exact prefix, and nothing else."""

    async def test_finds_a_key_by_its_prefix_without_a_tenant(
        self, app_conn: psycopg.AsyncConnection, tenant_a: Tenant
    ) -> None:
        cur = await app_conn.execute(
            "SELECT tenant_id, secret_hash FROM memvault_find_api_key(%s)", (tokens.lookup_prefix(tenant_a.key),)
        )

        assert await cur.fetchall() == [(tenant_a.id, tokens.hash_key(tenant_a.key))]

    @pytest.mark.usefixtures("tenant_a", "tenant_b")
    @pytest.mark.parametrize("pattern", ["%", "mv_%", "", "mv_"], ids=["percent", "prefix-wildcard", "empty", "bare"])
    async def test_patterns_find_nothing(self, app_conn: psycopg.AsyncConnection, pattern: str) -> None:
        cur = await app_conn.execute("SELECT count(*) FROM memvault_find_api_key(%s)", (pattern,))

        assert await cur.fetchone() == (0,)

    async def test_finds_a_rotated_key_by_either_prefix_with_that_secrets_hash(
        self, app_conn: psycopg.AsyncConnection, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        [own] = (await api.list_keys(tenant_a.principal)).data
        rotated = await api.rotate_key(tenant_a.principal, own.id, KeyRotateIn(grace_seconds=60))
        query = "SELECT tenant_id, secret_hash, secret_expires_at FROM memvault_find_api_key(%s)"

        old = await (await app_conn.execute(query, (tokens.lookup_prefix(tenant_a.key),))).fetchall()
        new = await (await app_conn.execute(query, (tokens.lookup_prefix(rotated.key),))).fetchall()

        assert old == [(tenant_a.id, tokens.hash_key(tenant_a.key), rotated.previous_expires_at)]
        assert new == [(tenant_a.id, tokens.hash_key(rotated.key), None)]

    async def test_unknown_prefix_finds_nothing(self, app_conn: psycopg.AsyncConnection) -> None:
        cur = await app_conn.execute("SELECT count(*) FROM memvault_find_api_key(%s)", (f"mv_{uuid.uuid4().hex[:12]}",))

        assert await cur.fetchone() == (0,)


class TestSystemScope:
    async def test_readable_by_a_tenant_not_without_one_and_never_writable(
        self, app_conn: psycopg.AsyncConnection, owner_conn: psycopg.AsyncConnection, tenant_a: Tenant
    ) -> None:
        system = "00000000-0000-0000-0000-000000000000"
        mid = await scalar(
            owner_conn,
            "INSERT INTO memories (tenant_id, namespace_id, scope, type, content, content_hash, created_by) "
            "VALUES (%s, NULL, 'system', 'instruction', 'be kind', 'h', 'operator') RETURNING id",
            (system,),
        )
        try:
            assert await scalar(app_conn, "SELECT count(*) FROM memories WHERE id = %s", (mid,)) == 0
            async with app_conn.transaction():
                await set_tenant(app_conn, tenant_a)
                assert await scalar(app_conn, "SELECT count(*) FROM memories WHERE id = %s", (mid,)) == 1
                cur = await app_conn.execute("UPDATE memories SET content = 'be rude' WHERE id = %s", (mid,))
                assert cur.rowcount == 0
                cur = await app_conn.execute("DELETE FROM memories WHERE id = %s", (mid,))
                assert cur.rowcount == 0
            assert await scalar(owner_conn, "SELECT content FROM memories WHERE id = %s", (mid,)) == "be kind"
        finally:
            await owner_conn.execute("DELETE FROM memories WHERE id = %s", (mid,))


class TestTenantRowsPlanned:
    """memvault_tenant_rows_planned (migration 0038) reads the statistics the app role may not
    (pg_stats hides a table under row-level security): only the transaction's own tenant's."""

    async def test_answers_for_the_transactions_tenant_only(
        self,
        api: NamespaceAPI,
        app_conn: psycopg.AsyncConnection,
        owner_conn: psycopg.AsyncConnection,
        tenant_a: Tenant,
        tenant_b: Tenant,
    ) -> None:
        ns_a = await scalar(owner_conn, "SELECT id FROM namespaces WHERE tenant_id = %s", (tenant_a.id,))
        await owner_conn.execute(
            "INSERT INTO memories (tenant_id, namespace_id, type, content, scope, content_hash, created_by) "
            "SELECT %s, %s, 'fact', 'Note ' || g, 'namespace', md5(g::text), 'import' FROM generate_series(1, 2000) g",
            (tenant_a.id, ns_a),
        )
        await owner_conn.execute("ANALYZE memories")
        common = await scalar(
            owner_conn,
            "SELECT most_common_vals::text::uuid[] FROM pg_stats "
            "WHERE tablename = 'memories' AND attname = 'tenant_id'",
        )
        assert tenant_a.id in common and tenant_b.id not in common

        async with app_conn.transaction():
            hidden = await scalar(
                app_conn, "SELECT count(*) FROM pg_stats WHERE tablename = 'memories' AND attname = 'tenant_id'"
            )
            nobody = await scalar(app_conn, "SELECT memvault_tenant_rows_planned()")
        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_a)
            own = await scalar(app_conn, "SELECT memvault_tenant_rows_planned()")
        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_b)
            other = await scalar(app_conn, "SELECT memvault_tenant_rows_planned()")

        assert hidden == 0
        assert nobody is None
        assert own > 1000
        assert other is None  # priced as any tenant: not tenant A's figure

        # Every statement of tenant A's transactions says so, for the plans PostgreSQL keeps
        # (db/planned.py); tenant B's say nothing: priced alike with every other tenant.
        sent: list[str] = []

        def capture(_conn: Any, _cursor: Any, statement: str, _params: Any, _context: Any, _many: bool) -> None:
            sent.append(statement)

        engine = api._db.app_engine.sync_engine
        api._db.planned_sizes.forget()
        event.listen(engine, "before_cursor_execute", capture)
        try:
            for tenant in (tenant_a, tenant_b):
                async with api._db.tenant_tx(tenant.id) as tx:
                    await tx.session.execute(text("SELECT count(*) FROM memories"))
        finally:
            event.remove(engine, "before_cursor_execute", capture)
        query = "SELECT count(*) FROM memories"
        counts = [statement for statement in sent if statement.endswith(query)]
        assert counts == [f"/* tenant rows ~1e{int(math.log10(own))} */ {query}", query]


@pytest.mark.usefixtures("data")
class TestWordMatchFunctions:
    """memvault_word_match and memvault_word_counts (migration 0008), memvault_word_top (0010, and
    its keyed twin the search calls, 0016) and memvault_word_scores (0010) look past RLS to use the
    full-text index: they must answer only for the tenant set in the transaction."""

    async def test_match_returns_only_the_current_tenants_ids(
        self, app_conn: psycopg.AsyncConnection, owner_conn: psycopg.AsyncConnection, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        own = {
            r[0]
            for r in await (
                await owner_conn.execute(
                    "SELECT id FROM memories WHERE tenant_id = %s AND tsv @@ 'oslo'", (tenant_a.id,)
                )
            ).fetchall()
        }
        assert own  # both tenants have an Oslo memory
        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_a)
            found = {
                r[0] for r in await (await app_conn.execute("SELECT id FROM memvault_word_match('oslo')")).fetchall()
            }
        async with app_conn.transaction():
            nobody = await scalar(app_conn, "SELECT count(*) FROM memvault_word_match('oslo')")

        assert found == own
        assert nobody == 0

    async def test_counts_only_the_current_tenants_namespace(
        self, app_conn: psycopg.AsyncConnection, owner_conn: psycopg.AsyncConnection, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        ns_b = await scalar(owner_conn, "SELECT id FROM namespaces WHERE tenant_id = %s", (tenant_b.id,))
        ns_a = await scalar(owner_conn, "SELECT id FROM namespaces WHERE tenant_id = %s", (tenant_a.id,))
        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_a)
            own = await scalar(app_conn, "SELECT df FROM memvault_word_counts(%s, ARRAY['oslo'], 100)", (ns_a,))
            # Tenant B's namespace id, asked from tenant A: nothing.
            other = await scalar(app_conn, "SELECT df FROM memvault_word_counts(%s, ARRAY['oslo'], 100)", (ns_b,))

        assert own == 1
        assert other == 0

    async def test_top_scores_only_the_current_tenants_namespace(
        self, app_conn: psycopg.AsyncConnection, owner_conn: psycopg.AsyncConnection, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        ns_a = await scalar(owner_conn, "SELECT id FROM namespaces WHERE tenant_id = %s", (tenant_a.id,))
        ns_b = await scalar(owner_conn, "SELECT id FROM namespaces WHERE tenant_id = %s", (tenant_b.id,))
        oslo_a, length = (
            await (
                await owner_conn.execute(
                    "SELECT id, length(tsv) FROM memories WHERE tenant_id = %s AND tsv @@ 'oslo'", (tenant_a.id,)
                )
            ).fetchall()
        )[0]
        top = (
            "SELECT tenant_id, id, score "
            "FROM memvault_word_top_keyed(%s, 'oslo', ARRAY['oslo']::tsquery[], ARRAY[2.0], 4.0, true, 10)"
        )
        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_a)
            own = await (await app_conn.execute(top, (ns_a,))).fetchall()
            # Tenant B's namespace, asked from tenant A: nothing.
            other = await (await app_conn.execute(top, (ns_b,))).fetchall()
        async with app_conn.transaction():
            nobody = await (await app_conn.execute(top, (ns_a,))).fetchall()

        # BM25 of one word with idf 2: 2 (k1 + 1) / (1 + k1 (1 - b + b len / avg)).
        assert own == [(tenant_a.id, oslo_a, pytest.approx(2.0 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * length / 4.0))))]
        assert other == [] and nobody == []

    async def test_scores_only_the_current_tenants_rows(
        self, app_conn: psycopg.AsyncConnection, owner_conn: psycopg.AsyncConnection, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        ids = {
            tenant.id: [
                r[0]
                for r in await (
                    await owner_conn.execute("SELECT id FROM memories WHERE tenant_id = %s", (tenant.id,))
                ).fetchall()
            ]
            for tenant in (tenant_a, tenant_b)
        }
        scores = "SELECT id, score FROM memvault_word_scores(%s, ARRAY['oslo']::tsquery[], ARRAY[2.0], 4.0)"
        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_a)
            found = dict(await (await app_conn.execute(scores, (ids[tenant_a.id] + ids[tenant_b.id],))).fetchall())

        assert set(found) == set(ids[tenant_a.id])
        assert sum(1 for v in found.values() if v > 0) == 1  # tenant A's one Oslo memory


@pytest.mark.usefixtures("data")
class TestNearestFunction:
    """memvault_nearest (migration 0011; the search calls its keyed twin, 0016) finds the dense
    channel's rows in a plan of its own: it must answer only for the tenant set in the
    transaction, nearest first, each row with its tenant."""

    # memvault_nearest_exact (0037): the keyed function's exact read when its graph scan comes
    # back short, callable by the app role on its own.
    @pytest.mark.parametrize("fn", ["memvault_nearest_keyed", "memvault_nearest_exact"])
    async def test_returns_only_the_current_tenants_rows_nearest_first(
        self,
        app_conn: psycopg.AsyncConnection,
        owner_conn: psycopg.AsyncConnection,
        tenant_a: Tenant,
        tenant_b: Tenant,
        fn: str,
    ) -> None:
        ns = {
            tenant.id: await scalar(owner_conn, "SELECT id FROM namespaces WHERE tenant_id = %s", (tenant.id,))
            for tenant in (tenant_a, tenant_b)
        }
        # Tenant A's Oslo memory's own vector: it is its own nearest row.
        oslo_a, vector, model = (
            await (
                await owner_conn.execute(
                    "SELECT id, embedding::text, embedding_model FROM memories "
                    "WHERE tenant_id = %s AND content LIKE '%%Oslo%%'",
                    (tenant_a.id,),
                )
            ).fetchall()
        )[0]
        own = {
            r[0]
            for r in await (
                await owner_conn.execute(
                    "SELECT id FROM memories WHERE tenant_id = %s AND embedding IS NOT NULL", (tenant_a.id,)
                )
            ).fetchall()
        }
        nearest = f"SELECT id, dist, tenant_id FROM {fn}(%s, %s::vector, %s, 100)"
        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_a)
            found = await (await app_conn.execute(nearest, (ns[tenant_a.id], vector, model))).fetchall()
            # Tenant B's namespace, asked from tenant A: nothing.
            other = await (await app_conn.execute(nearest, (ns[tenant_b.id], vector, model))).fetchall()
            another_model = await (await app_conn.execute(nearest, (ns[tenant_a.id], vector, "other"))).fetchall()
        async with app_conn.transaction():
            nobody = await (await app_conn.execute(nearest, (ns[tenant_a.id], vector, model))).fetchall()

        assert {r[0] for r in found} == own and {r[2] for r in found} == {tenant_a.id}
        assert found[0][0] == oslo_a and found[0][1] == pytest.approx(0.0, abs=1e-6)
        assert [r[1] for r in found] == sorted(r[1] for r in found)
        assert other == [] and another_model == [] and nobody == []


@pytest.mark.usefixtures("data")
class TestWordScoreTerms:
    """Migration 0012 sums the idf of up to 16 query words as one expression, and keeps the
    subquery for longer queries: both must give a row the same score."""

    async def test_a_long_query_scores_as_a_short_one(
        self, app_conn: psycopg.AsyncConnection, owner_conn: psycopg.AsyncConnection, tenant_a: Tenant
    ) -> None:
        ns_a = await scalar(owner_conn, "SELECT id FROM namespaces WHERE tenant_id = %s", (tenant_a.id,))
        absent = [f"zzabsent{i}" for i in range(20)]  # words no memory has
        top = "SELECT id, score FROM memvault_word_top_keyed(%s, 'oslo | green', %s::tsquery[], %s, 4.0, true, 10)"
        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_a)
            short = await (await app_conn.execute(top, (ns_a, ["oslo", "green"], [2.0, 3.0]))).fetchall()
            long = await (
                await app_conn.execute(top, (ns_a, ["oslo", *absent, "green"], [2.0, *[9.0] * 20, 3.0]))
            ).fetchall()

        assert len(short) == 2  # "lives in Oslo", "likes green tea"
        assert long == short


class TestSystemTenant:
    """Every tenant reads the system tenant's memories (system_read, by tenant alone since
    migration 0030): so that tenant may hold nothing but system-scope memories."""

    async def test_only_system_scope_memories_live_in_the_system_tenant(
        self, api: NamespaceAPI, pg_urls: DatabaseUrls, tenant_a: Tenant
    ) -> None:
        operator = Principal.system(tenant_a.id, subject="cli", operator=True)
        m = await api.store(operator, "default", MemoryIn(content="Answer in English", scope=ScopeLevel.system))
        async with await psycopg.AsyncConnection.connect(conninfo(pg_urls.owner), autocommit=True) as owner:
            try:
                with pytest.raises(errors.CheckViolation):
                    await owner.execute("UPDATE memories SET scope = 'namespace' WHERE id = %s", (m.id,))
            finally:
                await owner.execute("DELETE FROM memories WHERE id = %s", (m.id,))


async def one_event(owner_conn: psycopg.AsyncConnection, tenant: Tenant, session_id: str | None) -> tuple[Any, Any]:
    """(namespace id, memory id) of an event stored now in the tenant's namespace, as the owner."""
    ns = await scalar(owner_conn, "SELECT id FROM namespaces WHERE tenant_id = %s", (tenant.id,))
    mid = await scalar(
        owner_conn,
        "INSERT INTO memories (tenant_id, namespace_id, scope, type, content, content_hash, created_by, session_id, "
        "valid_from) VALUES (%s, %s, 'namespace', 'event', 'Ana: hi', 'h', 'test', %s, now()) RETURNING id",
        (tenant.id, ns, session_id),
    )
    return ns, mid


@pytest.mark.usefixtures("data")
class TestInferredProbeFunctions:
    """memvault_alone_before / memvault_alone_after (migration 0033) read past RLS to walk the
    session-less events' index: they must answer only for the tenant set in the transaction."""

    async def test_only_the_current_tenants_namespace(
        self, app_conn: psycopg.AsyncConnection, owner_conn: psycopg.AsyncConnection, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        ids = {t.id: await one_event(owner_conn, t, None) for t in (tenant_a, tenant_b)}
        probe = (
            "SELECT tenant_id, id FROM memvault_alone_after(%s, 'namespace', '', '', now() - interval '1 minute', 0, "
            "3600, 8)"
        )
        ns_a, mid_a = ids[tenant_a.id]
        ns_b, _ = ids[tenant_b.id]
        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_a)
            own = await (await app_conn.execute(probe, (ns_a,))).fetchall()
            # Tenant B's namespace id, asked from tenant A: nothing.
            other = await (await app_conn.execute(probe, (ns_b,))).fetchall()
        async with app_conn.transaction():
            nobody = await (await app_conn.execute(probe, (ns_a,))).fetchall()

        assert own == [(tenant_a.id, mid_a)]
        assert other == [] and nobody == []


@pytest.mark.usefixtures("data")
class TestSessionProbeFunctions:
    """memvault_session_before / memvault_session_after (migration 0039) read past RLS to walk the
    session index: they must answer only for the tenant set in the transaction, whoever's session
    id or namespace id they are given."""

    async def test_only_the_current_tenants_session(
        self, app_conn: psycopg.AsyncConnection, owner_conn: psycopg.AsyncConnection, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        ids = {t.id: await one_event(owner_conn, t, "shared-id") for t in (tenant_a, tenant_b)}
        before = "SELECT tenant_id, id FROM memvault_session_before(%s, 'shared-id', now() + interval '1 minute', 0, 8)"
        after = "SELECT tenant_id, id FROM memvault_session_after(%s, 'shared-id', now() - interval '1 minute', 0, 8)"
        ns_a, mid_a = ids[tenant_a.id]
        ns_b, _ = ids[tenant_b.id]
        async with app_conn.transaction():
            await set_tenant(app_conn, tenant_a)
            own = [await (await app_conn.execute(probe, (ns_a,))).fetchall() for probe in (before, after)]
            # Tenant B's namespace, asked from tenant A with the same session id: nothing.
            other = [await (await app_conn.execute(probe, (ns_b,))).fetchall() for probe in (before, after)]
        async with app_conn.transaction():
            nobody = await (await app_conn.execute(before, (ns_a,))).fetchall()

        assert own == [[(tenant_a.id, mid_a)], [(tenant_a.id, mid_a)]]
        assert other == [[], []] and nobody == []
