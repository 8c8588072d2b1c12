"""Overload over real HTTP: uvicorn on 127.0.0.1 with a small in-flight limit, held full by
uploads whose bodies have not finished arriving (a slow client is the slow request every server
meets). The request past the limit is answered at once with 503 `overloaded` and Retry-After,
/readyz says the process is full, and both recover as soon as the held requests end."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from tests.conftest import Tenant, running
from tests.gateway.test_slow_body import open_upload
from tests.servers import served

LIMIT = 2
# "At once": far below the seconds a queued request would wait, with room for a busy machine.
AT_ONCE_S = 1.0


@pytest.fixture
async def base(settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder) -> AsyncIterator[str]:
    own = settings.model_copy(update={"max_in_flight": LIMIT})
    async with running(create_app(own, urls=pg_urls, embedder=embedder)) as app, served(app) as url:
        yield url


async def wait_for(client: httpx.AsyncClient, path: str, status: int) -> httpx.Response:
    deadline = time.monotonic() + 10
    while True:
        resp = await client.get(path)
        if resp.status_code == status or time.monotonic() > deadline:
            return resp
        await asyncio.sleep(0.05)


class TestOverload:
    async def test_past_the_limit_a_request_is_refused_at_once_and_service_recovers(
        self, base: str, tenant_a: Tenant
    ) -> None:
        path = f"/v1/namespaces/{tenant_a.namespace}/memories"
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            assert (await client.get("/readyz")).status_code == 200
            held = [await open_upload(base, path, tenant_a.key, 1000) for _ in range(LIMIT)]
            try:
                full = await wait_for(client, "/readyz", 503)
                assert full.status_code == 503, full.text
                assert full.json()["code"] == "overloaded"
                assert full.json()["in_flight"] == LIMIT

                started = time.perf_counter()
                refused = await client.get("/v1/status", headers=tenant_a.headers)
                took = time.perf_counter() - started

                assert refused.status_code == 503
                assert took < AT_ONCE_S, f"the refusal took {took:.2f} s"
                body = refused.json()
                assert body["code"] == "overloaded"
                assert body["request_id"] == refused.headers["x-request-id"]
                assert refused.headers["retry-after"] == "1"
                assert refused.headers["content-type"] == "application/problem+json"
                # The probes and the scrape still answer while the process is full.
                assert (await client.get("/healthz")).status_code == 200
                scraped = await client.get("/metrics")
                assert scraped.status_code == 200
                assert 'memvault_overload_refusals_total{door="rest"}' in scraped.text
                assert f"memvault_http_requests_in_flight {float(LIMIT)}" in scraped.text
            finally:
                for _, writer in held:
                    writer.close()

            assert (await wait_for(client, "/readyz", 200)).status_code == 200
            again = await client.get("/v1/status", headers=tenant_a.headers)
            assert again.status_code == 200

    async def test_the_mcp_door_is_refused_the_same_way(self, base: str, tenant_a: Tenant) -> None:
        path = f"/v1/namespaces/{tenant_a.namespace}/memories"
        held = [await open_upload(base, path, tenant_a.key, 1000) for _ in range(LIMIT)]
        try:
            async with httpx.AsyncClient(base_url=base, timeout=10) as client:
                await wait_for(client, "/readyz", 503)
                resp = await client.post(
                    "/mcp",
                    json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                    headers={**tenant_a.headers, "Accept": "application/json, text/event-stream"},
                )
        finally:
            for _, writer in held:
                writer.close()

        assert resp.status_code == 503
        assert resp.json()["code"] == "overloaded"
        assert resp.headers["retry-after"] == "1"
