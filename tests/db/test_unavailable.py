"""Which database failures are "the database is away" (503 `database_unavailable`, retry) and
which are not (a bad or slow statement stays what it is): the line db/session.py draws for
every door."""

from __future__ import annotations

import tempfile

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

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
