"""Deleting a tenant (`memvault admin delete-tenant`, and the scheduler's purge of sign-ups nobody
verified): every row it held, in every table that carries a tenant, is gone, and no other tenant
loses a row."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psycopg
import pytest

from memvault.api import NamespaceAPI
from memvault.db.session import Database
from memvault.db.urls import DatabaseUrls
from memvault.metering.tally import Tally
from memvault.operations import Operation
from memvault.operator import TenantProtected, delete_tenant, purge_unverified_signups
from memvault.principal import SYSTEM_TENANT_ID
from memvault.tenants import service as tenants
from tests.cli.test_cli import MEMVAULT, clean_env
from tests.conftest import Tenant, make_tenant
from tests.db.conftest import conninfo

TABLES = """
    SELECT c.relname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE a.attname = 'tenant_id' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
      AND n.nspname = current_schema()
"""


def rows_of(pg_urls: DatabaseUrls, tenant_id: uuid.UUID) -> dict[str, int]:
    """Rows per table for this tenant, read as the owner (no row-level security in the way)."""
    with psycopg.connect(conninfo(pg_urls.owner)) as conn:
        tables = [t for (t,) in conn.execute(TABLES).fetchall()]
        counts = {
            t: conn.execute(f'SELECT count(*) FROM "{t}" WHERE tenant_id = %s', (tenant_id,)).fetchone()[0]
            for t in tables
        }  # type: ignore[index]
        counts["tenants"] = conn.execute("SELECT count(*) FROM tenants WHERE id = %s", (tenant_id,)).fetchone()[0]  # type: ignore[index]
    return {t: n for t, n in counts.items() if n}


async def fill(client: httpx.AsyncClient, t: Tenant) -> None:
    """A tenant that used most of what there is: memories with history and entities, a
    conversation's events (and the jobs they queue), keys, a user, a webhook, searches."""
    ns = f"/v1/namespaces/{t.namespace}"
    ana = (await client.post(f"{ns}/entities", json={"name": "Ana", "type": "person"}, headers=t.headers)).json()
    for i in range(3):
        r = await client.post(
            f"{ns}/memories", json={"content": f"Ana fact {i}", "entity_ids": [ana["id"]]}, headers=t.headers
        )
        assert r.status_code == 201, r.text
    r = await client.patch(f"{ns}/memories/{r.json()['id']}", json={"content": "Ana fact, edited"}, headers=t.headers)
    assert r.status_code == 200, r.text
    events = {"session_id": "s1", "messages": [{"role": "user", "content": "I moved to Lisbon last spring"}]}
    assert (await client.post(f"{ns}/events", json=events, headers=t.headers)).status_code in (200, 201, 202)
    assert (await client.post(f"{ns}/search", json={"query": "where is Ana"}, headers=t.headers)).status_code == 200
    assert (await client.post("/v1/keys", json={"scopes": ["read"]}, headers=t.headers)).status_code == 201
    retried = {**t.headers, "Idempotency-Key": "once"}
    assert (await client.post(f"{ns}/memories", json={"content": "once"}, headers=retried)).status_code == 201
    user = {"email": f"u-{uuid.uuid4().hex[:8]}@example.com", "password": "a long enough password", "role": "member"}
    assert (await client.post("/v1/users", json=user, headers=t.headers)).status_code == 201
    hook = {"url": "https://hooks.example.com/memvault", "events": ["memory.created"]}
    assert (await client.post("/v1/webhooks", json=hook, headers=t.headers)).status_code == 201


async def test_deleting_a_tenant_leaves_none_of_its_rows_and_spares_the_others(
    api: NamespaceAPI, client: httpx.AsyncClient, pg_urls: DatabaseUrls
) -> None:
    a, b = await make_tenant(api, "doomed"), await make_tenant(api, "kept")
    await fill(client, a)
    await fill(client, b)
    before_a, before_b = rows_of(pg_urls, a.id), rows_of(pg_urls, b.id)
    assert len(before_a) >= 12, before_a  # the test is only as good as the tables it filled

    db = Database(pg_urls, pool_size=1)
    try:
        deleted = await delete_tenant(db, a.name)
        assert await delete_tenant(db, a.name) is None
    finally:
        await db.dispose()
    assert deleted is not None and deleted["memories"] == before_a["memories"]

    assert rows_of(pg_urls, a.id) == {}
    after_b = rows_of(pg_urls, b.id)
    assert {t: n for t, n in after_b.items() if n < before_b.get(t, 0)} == {}  # b lost nothing
    assert (await client.get("/v1/namespaces", headers=a.headers)).status_code == 401
    r = await client.post(f"/v1/namespaces/{b.namespace}/search", json={"query": "Ana"}, headers=b.headers)
    assert r.status_code == 200 and r.json()["results"]


async def test_the_system_tenant_cannot_be_deleted(pg_urls: DatabaseUrls) -> None:
    db = Database(pg_urls, pool_size=1)
    try:
        with pytest.raises(TenantProtected):
            await delete_tenant(db, "__system__")  # the name migration 0002 gave it
    finally:
        await db.dispose()
    assert rows_of(pg_urls, SYSTEM_TENANT_ID).get("tenants") == 1


async def test_sign_ups_nobody_verified_are_purged_and_nothing_else(api: NamespaceAPI, pg_urls: DatabaseUrls) -> None:
    db = Database(pg_urls, pool_size=1)
    tag = uuid.uuid4().hex[:8]
    try:
        async with db.owner() as s:
            made = {}
            for label in ("stale", "fresh", "verified"):
                org = await tenants.create_organisation(
                    s, f"{label}-{tag}", namespace="default", plan="free",
                    owner_email=f"{label}-{tag}@example.com", owner_password_hash="x",
                )  # fmt: skip
                made[label] = org
        operator_made = await make_tenant(api, f"operator-{tag}")  # a key, no user: the operator's
        with psycopg.connect(conninfo(pg_urls.owner)) as c:
            old = datetime.now(UTC) - timedelta(days=8)
            for label in ("stale", "verified"):
                c.execute("UPDATE tenants SET created_at = %s WHERE id = %s", (old, made[label].id))
            c.execute("UPDATE tenants SET created_at = %s WHERE id = %s", (old, operator_made.id))
            c.execute("UPDATE oauth_users SET email_verified_at = now() WHERE tenant_id = %s", (made["verified"].id,))

        purged = await purge_unverified_signups(db, datetime.now(UTC) - timedelta(days=7))
        assert f"stale-{tag}" in purged
        assert not {f"fresh-{tag}", f"verified-{tag}", operator_made.name} & set(purged)
        assert rows_of(pg_urls, made["stale"].id) == {}
        for kept in (made["fresh"].id, made["verified"].id, operator_made.id):
            assert rows_of(pg_urls, kept).get("tenants") == 1
    finally:
        await db.dispose()


async def test_the_scheduler_tick_purges_them(api: NamespaceAPI, pg_urls: DatabaseUrls) -> None:
    db = Database(pg_urls, pool_size=1)
    name = f"tick-{uuid.uuid4().hex[:8]}"
    try:
        async with db.owner() as s:
            org = await tenants.create_organisation(
                s, name, namespace="default", plan="free", owner_email=f"{name}@example.com", owner_password_hash="x"
            )
    finally:
        await db.dispose()
    tick = await api.queue_due_maintenance(now=datetime.now(UTC) + timedelta(days=8))
    assert name in tick.purged_signups
    assert rows_of(pg_urls, org.id) == {}


@pytest.mark.slow  # runs the `memvault` console script
async def test_the_cli_wants_the_name_twice(api: NamespaceAPI, pg_urls: DatabaseUrls, tmp_path: Path) -> None:
    t = await make_tenant(api, "cli-doomed")
    env = clean_env(MEMVAULT_DATABASE_URL=pg_urls.owner.render_as_string(hide_password=False))

    async def admin(*args: str) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            str(MEMVAULT), "admin", "delete-tenant", *args, env=env, cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
        return proc.returncode or 0, out.decode(), err.decode()

    code, _, err = await admin("--tenant", t.name)
    assert code == 2 and f"--confirm {t.name}" in err
    assert rows_of(pg_urls, t.id).get("tenants") == 1
    code, out, err = await admin("--tenant", t.name, "--confirm", t.name)
    assert code == 0, err
    assert json.loads(out)["tenant"] == t.name and rows_of(pg_urls, t.id) == {}
    code, _, err = await admin("--tenant", t.name, "--confirm", t.name)
    assert code == 1 and "no tenant named" in err


async def test_usage_counted_before_the_deletion_is_dropped_not_kept(api: NamespaceAPI, pg_urls: DatabaseUrls) -> None:
    t = await make_tenant(api, "metered-doomed")
    db = Database(pg_urls, pool_size=1)
    try:
        await delete_tenant(db, t.name)
    finally:
        await db.dispose()
    # A search that was answered while the tenant was being deleted: its count is still to write.
    api._usage.record(t.principal, Operation("search", "search"), "rest", Tally(), plan="free")
    assert api._usage.pending >= 1
    await api._usage.flush()
    assert api._usage.pending == 0  # not held and retried at every flush, crowding out the others
    assert rows_of(pg_urls, t.id) == {}
