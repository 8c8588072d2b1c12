"""/metrics after real traffic: the series an operator's dashboard reads, parsed with
prometheus_client's own parser, with labels that stay bounded, and a scrape only the operator
may make."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from pydantic import SecretStr

from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from tests.conftest import Tenant, running

SEARCH_ROUTE = "/v1/namespaces/{ns}/search"


async def scrape(client: httpx.AsyncClient) -> dict[str, list[Sample]]:
    resp = await client.get("/metrics")
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/plain")
    samples: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(resp.text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
        # Families with no samples yet (no job waiting) still say they exist; the parser names a
        # counter's family without its _total.
        samples.setdefault(family.name + ("_total" if family.type == "counter" else ""), [])
    return samples


def value(samples: dict[str, list[Sample]], name: str, **labels: str) -> float:
    return sum(s.value for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items()))


async def some_traffic(client: httpx.AsyncClient, tenant: Tenant) -> None:
    base = f"/v1/namespaces/{tenant.namespace}"
    stored = await client.post(f"{base}/memories", json={"content": "Ada prefers green tea."}, headers=tenant.headers)
    assert stored.status_code == 201, stored.text
    found = await client.post(f"{base}/search", json={"query": f"tea {uuid.uuid4().hex}"}, headers=tenant.headers)
    assert found.status_code == 200, found.text


class TestScrape:
    async def test_requests_search_stages_embedding_pool_and_queue_are_reported(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        before = await scrape(client)
        await some_traffic(client, tenant_a)
        mcp = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})  # no key: 401 on MCP

        after = await scrape(client)

        def delta(name: str, **labels: str) -> float:
            return value(after, name, **labels) - value(before, name, **labels)

        assert delta("memvault_http_requests_total", door="rest", route=SEARCH_ROUTE, method="POST", status="200") == 1
        assert delta("memvault_http_request_duration_seconds_count", door="rest", route=SEARCH_ROUTE) == 1
        assert (
            delta("memvault_http_requests_total", door="mcp", route="/mcp", method="POST", status=str(mcp.status_code))
            == 1
        )
        for stage in ("embed", "sql", "total"):
            assert delta("memvault_search_stage_seconds_count", stage=stage) == 1, stage
        assert delta("memvault_embedding_batch_size_count", provider="local") >= 1
        assert delta("memvault_embedding_duration_seconds_count", provider="local") >= 1
        assert value(after, "memvault_db_pool_size", pool="app") >= 10
        assert "memvault_db_pool_connections_in_use" in after
        assert "memvault_jobs_queued" in after
        # The scrape itself is exempt from admission: nothing else was in flight.
        assert value(after, "memvault_http_requests_in_flight") == 0
        assert value(after, "memvault_http_requests_in_flight_limit") >= 32
        assert "memvault_overload_refusals_total" in after
        assert "memvault_rate_limit_refusals_total" in after
        assert "memvault_job_duration_seconds_count" in after or "memvault_job_duration_seconds" in after

    async def test_each_request_transaction_records_its_wait_for_a_pooled_connection(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        before = await scrape(client)
        await some_traffic(client, tenant_a)

        after = await scrape(client)

        waits = value(after, "memvault_db_pool_wait_seconds_count", pool="app")
        waits -= value(before, "memvault_db_pool_wait_seconds_count", pool="app")
        assert waits >= 2  # a store, a search
        assert value(after, "memvault_db_pool_wait_seconds_sum", pool="app") > 0
        # An idle pool hands a connection out at once: every wait of this traffic is within the 30 s
        # bucket. (Of this traffic only: the session's app served the whole suite before, under load.)
        within = value(after, "memvault_db_pool_wait_seconds_bucket", pool="app", le="30.0")
        within -= value(before, "memvault_db_pool_wait_seconds_bucket", pool="app", le="30.0")
        assert within == waits

    async def test_a_made_up_path_adds_no_label_value(self, client: httpx.AsyncClient) -> None:
        await client.get("/metrics")
        before = await scrape(client)
        made_up = f"/v1/no-such-thing-{uuid.uuid4().hex}"

        for _ in range(3):
            assert (await client.get(made_up)).status_code == 404
        after = await scrape(client)

        routes = {s.labels.get("route") for s in after["memvault_http_requests_total"]}
        assert not any(made_up in (r or "") for r in routes)
        assert routes - {s.labels.get("route") for s in before["memvault_http_requests_total"]} <= {"<unmatched>"}
        got = value(after, "memvault_http_requests_total", route="<unmatched>", status="404")
        assert got - value(before, "memvault_http_requests_total", route="<unmatched>", status="404") == 3
        assert not any(made_up in str(s.labels) for samples in after.values() for s in samples), (
            "a raw path reached a label"
        )


@pytest.fixture
async def token_app(settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder) -> AsyncIterator[object]:
    own = settings.model_copy(update={"metrics_token": SecretStr("scrape-secret-123")})
    async with running(create_app(own, urls=pg_urls, embedder=embedder)) as app:
        yield app


class TestAccess:
    async def test_without_a_token_only_this_machine_may_scrape(self, app: object) -> None:
        remote = httpx.ASGITransport(app=app, client=("203.0.113.9", 40000))  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=remote, base_url="http://memvault.test") as c:
            resp = await c.get("/metrics")

        assert resp.status_code == 403
        assert resp.json()["code"] == "metrics_forbidden"
        assert "MEMVAULT_METRICS_TOKEN" in resp.json()["detail"]

    async def test_with_a_token_the_scrape_must_send_it(self, token_app: object) -> None:
        # Even from loopback: once a token is set, it is the only way in.
        local = httpx.ASGITransport(app=token_app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=local, base_url="http://memvault.test") as c:
            missing = await c.get("/metrics")
            wrong = await c.get("/metrics", headers={"Authorization": "Bearer nope"})
            right = await c.get("/metrics", headers={"Authorization": "Bearer scrape-secret-123"})

        assert missing.status_code == wrong.status_code == 401
        assert missing.json()["code"] == "unauthenticated"
        assert right.status_code == 200
        assert "memvault_http_requests_total" in right.text
