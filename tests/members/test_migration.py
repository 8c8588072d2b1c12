"""Migration 0023 keeps what existing users could do: their scopes become a role that stands for
the same scopes, and going back restores the scopes. Migration 0028 adds act_as to owners and admins."""

from __future__ import annotations

import asyncio

import psycopg
from alembic import command

from memvault.db import migrate
from memvault.db.urls import DatabaseUrls
from memvault.oauth.schemas import UserIn
from tests.conftest import Tenant
from tests.db.conftest import conninfo
from tests.members.conftest import email
from tests.oauth.conftest import PASSWORD, Server


async def test_roles_from_scopes_and_back(mserver: Server, pg_urls: DatabaseUrls, tenant_x: Tenant) -> None:
    reader = await mserver.api.create_user(
        tenant_x.principal, UserIn(email=email(), password=PASSWORD, scopes=["read"])
    )
    writer = await mserver.api.create_user(tenant_x.principal, UserIn(email=email(), password=PASSWORD))
    assert (reader.role, writer.role) == ("viewer", "member")
    config = migrate.alembic_config(pg_urls.owner, "memvault_app")
    query = "SELECT id, {} FROM oauth_users WHERE tenant_id = %s ORDER BY created_at"
    async with await psycopg.AsyncConnection.connect(conninfo(pg_urls.owner), autocommit=True) as conn:
        await asyncio.to_thread(command.downgrade, config, "0022")
        try:
            before = await (await conn.execute(query.format("scopes"), (tenant_x.id,))).fetchall()
        finally:
            await asyncio.to_thread(command.upgrade, config, "head")
        after = await (await conn.execute(query.format("role, scopes"), (tenant_x.id,))).fetchall()
    assert before == [(reader.id, ["read"]), (writer.id, ["read", "write"])]
    assert after == [(reader.id, "viewer", ["read"]), (writer.id, "member", ["read", "write"])]


async def test_act_as_comes_with_owner_and_admin_and_goes_back(
    mserver: Server, pg_urls: DatabaseUrls, tenant_x: Tenant
) -> None:
    """Migration 0028: the roles that manage members hold act_as; the others never did."""
    admin = await mserver.api.create_user(tenant_x.principal, UserIn(email=email(), password=PASSWORD, role="admin"))
    member = await mserver.api.create_user(tenant_x.principal, UserIn(email=email(), password=PASSWORD))
    config = migrate.alembic_config(pg_urls.owner, "memvault_app")
    query = "SELECT scopes FROM oauth_users WHERE tenant_id = %s AND id = ANY(%s) ORDER BY created_at"
    ids = [admin.id, member.id]
    async with await psycopg.AsyncConnection.connect(conninfo(pg_urls.owner), autocommit=True) as conn:
        at_head = [r[0] for r in await (await conn.execute(query, (tenant_x.id, ids))).fetchall()]
        await asyncio.to_thread(command.downgrade, config, "0027")
        try:
            before = [r[0] for r in await (await conn.execute(query, (tenant_x.id, ids))).fetchall()]
        finally:
            await asyncio.to_thread(command.upgrade, config, "head")
    assert at_head == [["read", "write", "admin", "act_as"], ["read", "write"]]
    assert before == [["read", "write", "admin"], ["read", "write"]]
