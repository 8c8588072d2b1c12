"""Raw connections as the app role and as the owner, for the tests that check what PostgreSQL
itself enforces (row-level security, privileges, triggers) below the repositories."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from memvault.db.urls import DatabaseUrls
from tests.conftest import Tenant


def conninfo(url: Any) -> str:
    return url.render_as_string(hide_password=False).replace("+psycopg", "")


@pytest.fixture
async def app_conn(pg_urls: DatabaseUrls) -> AsyncIterator[psycopg.AsyncConnection]:
    """A connection as the app role. Autocommit, so each `conn.transaction()` block is one transaction."""
    async with await psycopg.AsyncConnection.connect(conninfo(pg_urls.app), autocommit=True) as conn:
        yield conn


@pytest.fixture
async def owner_conn(pg_urls: DatabaseUrls) -> AsyncIterator[psycopg.AsyncConnection]:
    """Only to confirm what exists; data is made through the facade."""
    async with await psycopg.AsyncConnection.connect(conninfo(pg_urls.owner), autocommit=True) as conn:
        yield conn


async def scalar(conn: psycopg.AsyncConnection, sql: str, params: tuple[Any, ...] = ()) -> Any:
    cur = await conn.execute(sql, params)
    row = await cur.fetchone()
    assert row is not None
    return row[0]


async def set_tenant(conn: psycopg.AsyncConnection, tenant: Tenant) -> None:
    await conn.execute("SELECT set_config('app.tenant_id', %s, true)", (str(tenant.id),))
