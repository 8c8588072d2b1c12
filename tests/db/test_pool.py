"""What a request's two checkouts of the app pool (its API key's lookup, its operation) cost in
round trips: a connection is pinged before it is handed out only when it sat idle, so under load
a checkout costs none, and one that died in the pool is still replaced before a request meets
it; the key's lookup is one statement in autocommit, with no BEGIN or COMMIT around it, and the
connection goes back to the pool ready for a tenant transaction."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.db.session import IDLE_BEFORE_PING_S, Database
from memvault.db.urls import DatabaseUrls


@pytest.fixture
async def db(pg_urls: DatabaseUrls) -> AsyncIterator[Database]:
    database = Database(pg_urls, pool_size=1)
    yield database
    await database.dispose()


def count_pings(database: Database) -> list[int]:
    """Count the dialect's pings on this database's app engine (how pool_pre_ping pings too)."""
    dialect = database.app_engine.sync_engine.dialect
    pings = [0]
    ping = dialect.do_ping

    def counted(dbapi_conn: object) -> bool:
        pings[0] += 1
        return ping(dbapi_conn)

    dialect.do_ping = counted  # type: ignore[method-assign]
    return pings


async def backend_pid(database: Database) -> int:
    async with database.tenant_tx(uuid.uuid4()) as tx:
        return int((await tx.session.execute(text("SELECT pg_backend_pid()"))).scalar_one())


class TestPings:
    async def test_a_connection_back_in_use_at_once_is_not_pinged(self, db: Database) -> None:
        first = await backend_pid(db)
        pings = count_pings(db)
        for _ in range(20):
            assert await backend_pid(db) == first  # one pooled connection, used again and again
        # pool_pre_ping pinged all 20; one ping is a stall of a second on a loaded machine.
        assert pings[0] <= 1

    async def test_a_connection_idle_for_a_while_is_pinged(self, db: Database) -> None:
        await backend_pid(db)
        pings = count_pings(db)
        await asyncio.sleep(IDLE_BEFORE_PING_S + 0.1)
        await backend_pid(db)
        assert pings[0] == 1

    async def test_a_connection_that_died_in_the_pool_is_replaced_before_use(self, db: Database) -> None:
        gone = await backend_pid(db)
        async with db.owner() as s:
            assert (await s.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": gone})).scalar_one()
        await asyncio.sleep(IDLE_BEFORE_PING_S + 0.1)
        # No error reaches the caller: the ping found the connection dead and the pool opened another.
        assert await backend_pid(db) != gone


async def transaction_status(session: AsyncSession) -> psycopg.pq.TransactionStatus:
    raw = await (await session.connection()).get_raw_connection()
    return raw.driver_connection.info.transaction_status  # type: ignore[union-attr]


class TestKeyLookup:
    async def test_the_lookup_leaves_no_transaction_open(self, db: Database) -> None:
        async with db.lookup() as s:
            assert (await s.execute(text("SELECT 1"))).scalar_one() == 1
            assert await transaction_status(s) == psycopg.pq.TransactionStatus.IDLE

    async def test_the_next_tenant_transaction_on_its_connection_is_one(self, db: Database) -> None:
        """SET LOCAL outside a transaction would set nothing, and row-level security would see no
        tenant: the connection must not stay in autocommit after the lookup."""
        tenant = uuid.uuid4()
        async with db.lookup() as s:
            looked_up = (await s.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        async with db.tenant_tx(tenant) as tx:
            assert (await tx.session.execute(text("SELECT pg_backend_pid()"))).scalar_one() == looked_up
            assert await transaction_status(tx.session) == psycopg.pq.TransactionStatus.INTRANS
            setting = await tx.session.execute(text("SELECT current_setting('app.tenant_id')"))
            assert setting.scalar_one() == str(tenant)
