"""A database that cannot be reached is a 503 `database_unavailable` with `Retry-After` on every
door, never a 500: the app here runs on a PostgreSQL socket where no server listens (what every
request meets while the database is down or restarting)."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator

import httpx
import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from memvault.app import create_app
from memvault.config import Settings
from memvault.db.session import Database, unavailable
from memvault.db.urls import DatabaseUrls, resolve
from memvault.embeddings.local import LocalEmbedder
from memvault.errors import DatabaseUnavailable
from tests.conftest import running

KEY = "mv_" + "a" * 40  # the shape of a key: checking it needs the database


@pytest.fixture
async def down(settings: Settings, embedder: LocalEmbedder) -> AsyncIterator[httpx.AsyncClient]:
    with tempfile.TemporaryDirectory(prefix="memvault-no-pg-") as nowhere:
        urls = resolve(f"postgresql://postgres:@/postgres?host={nowhere}", None, "memvault_app", embedded=True)
        async with running(create_app(settings, urls=urls, embedder=embedder)) as app:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test") as client:
                yield client


def assert_database_unavailable(r: httpx.Response) -> None:
    assert r.status_code == 503, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["code"] == "database_unavailable"
    assert r.headers["retry-after"] == "5"


class TestDatabaseDown:
    async def test_rest_requests_are_503_with_retry_after(self, down: httpx.AsyncClient) -> None:
        auth = {"Authorization": f"Bearer {KEY}"}
        assert_database_unavailable(await down.get("/v1/namespaces", headers=auth))
        assert_database_unavailable(
            await down.post("/v1/namespaces/default/memories", json={"content": "Ana likes tea"}, headers=auth)
        )

    async def test_mcp_is_503_without_a_sign_in_challenge(self, down: httpx.AsyncClient) -> None:
        r = await down.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Authorization": f"Bearer {KEY}", "Accept": "application/json, text/event-stream"},
        )
        assert_database_unavailable(r)
        # The credential may well be valid: a challenge would send the client to sign in again.
        assert "www-authenticate" not in r.headers

    async def test_liveness_holds_and_readiness_fails(self, down: httpx.AsyncClient) -> None:
        # An external database is not this process's to restart: it stays live, out of rotation.
        assert (await down.get("/healthz")).status_code == 200
        r = await down.get("/readyz")
        assert r.status_code == 503 and r.json()["code"] == "not_ready"


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
