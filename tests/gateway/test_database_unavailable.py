"""A database that cannot be reached is a 503 `database_unavailable` with `Retry-After` on every
door, never a 500: the app here runs on a PostgreSQL socket where no server listens (what every
request meets while the database is down or restarting)."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator

import httpx
import pytest

from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import resolve
from memvault.embeddings.local import LocalEmbedder
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
