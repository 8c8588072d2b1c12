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


async def clone_memory(api: Any, memory_id: Any, copies: int, *, older: bool = False, vector: bool = True) -> None:
    """``copies`` more rows of a stored memory, written as the owner: many rows fast where their
    embedding (the same one) is not what a test measures. ``older``: each copy a second older than
    the last, so a newest-first list puts them after the original. ``vector=False``: copies with no
    embedding, kept out of the shared test database's HNSW graph (hundreds of one vector cut
    memories near it off the graph: tests/maintenance/test_dedup.py)."""
    from sqlalchemy import text

    from memvault.memories.models import Memory

    columns = [c.name for c in Memory.__table__.columns if c.computed is None and c.name != "id"]
    made = {"created_at": "m.created_at - make_interval(secs => g)"} if older else {}
    if not vector:
        made["embedding"] = "NULL"
    async with api._db.owner() as s:
        await s.execute(
            text(
                f"INSERT INTO memories (id, {', '.join(columns)}) "
                f"SELECT gen_random_uuid(), {', '.join(made.get(c, f'm.{c}') for c in columns)} "
                "FROM memories m, generate_series(1, :copies) g WHERE m.id = :id"
            ),
            {"id": memory_id, "copies": copies},
        )
