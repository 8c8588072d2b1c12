"""Which database failures are "the database is away" (503 `database_unavailable`, retry) and
which are not (a bad or slow statement stays what it is): the line db/session.py draws for
every door."""

from __future__ import annotations

import tempfile

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, IntegrityError

from memvault.db.session import Database, unavailable
from memvault.db.urls import DatabaseUrls, resolve
from memvault.errors import DatabaseUnavailable


class TestWhatCountsAsUnavailable:
    async def test_a_refused_connection_is_and_a_bad_statement_is_not(self, pg_urls: DatabaseUrls) -> None:
        db = Database(pg_urls, pooled=False)
        try:
            # Passed on as they are: a bug or a slow statement is no reason to tell a client to retry.
            with pytest.raises(DBAPIError) as bad:
                async with db.owner() as s:
                    await s.execute(text("SELECT * FROM no_such_table"))
            assert not unavailable(bad.value)
            with pytest.raises(DBAPIError) as slow:
                async with db.owner() as s:
                    await s.execute(text("SET LOCAL statement_timeout = 1"))
                    await s.execute(text("SELECT pg_sleep(1)"))
            assert isinstance(slow.value.orig, psycopg.errors.QueryCanceled)
            assert not unavailable(slow.value)
        finally:
            await db.dispose()
        with tempfile.TemporaryDirectory() as nowhere:
            gone = Database(resolve(f"postgresql://postgres:@/postgres?host={nowhere}", None, "r", embedded=True))
            try:
                with pytest.raises(DatabaseUnavailable):
                    async with gone.owner() as s:
                        await s.execute(text("SELECT 1"))
            finally:
                await gone.dispose()

    async def test_a_write_across_a_blocking_shard_move_is_and_a_foreign_key_violation_is_not(
        self, pg_urls: DatabaseUrls
    ) -> None:
        """On Citus a write whose transaction spans `isolate-tenant --mode block_writes` puts its
        history row on a new shard that lacks the memory its first statement wrote to the old one: a
        foreign-key violation on a shard's table (``memory_history_102040``), answered 503 to retry.
        The same violation on one node's tables is a real one and stays as it is."""
        db = Database(pg_urls, pooled=False)
        raised = {}
        try:
            for parent, child in (("memories_102008", "memory_history_102040"), ("parents", "memory_history")):
                with pytest.raises((DBAPIError, DatabaseUnavailable)) as failed:
                    async with db.owner() as s:
                        await s.execute(text(f"CREATE TEMP TABLE {parent} (id int PRIMARY KEY)"))
                        await s.execute(text(f"CREATE TEMP TABLE {child} (memory_id int REFERENCES {parent})"))
                        await s.execute(text(f"INSERT INTO {child} VALUES (1)"))
                cause = failed.value if isinstance(failed.value, DBAPIError) else failed.value.__cause__
                assert isinstance(cause, DBAPIError) and isinstance(cause.orig, psycopg.errors.ForeignKeyViolation)
                raised[child] = type(failed.value)
        finally:
            await db.dispose()
        assert raised == {"memory_history_102040": DatabaseUnavailable, "memory_history": IntegrityError}
