"""The status page's data: each component's state in /v1/status, the scheduler's health samples
aggregated per day in /v1/status/history with the degraded periods, latency per door measured by
the server, and the page itself (its headers; tests/browser shows it in a real browser)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import httpx

from memvault.api import NamespaceAPI
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from memvault.jobs import schedule
from memvault.jobs.runner import JobContext
from memvault.status import repository as repo
from memvault.status.latency import BOUNDS_MS, bucket_of, percentile
from tests.conftest import Tenant
from tests.mcp.conftest import call, mcp_session
from tests.servers import free_port
from tests.status.test_router import app_client, store

COMPONENTS = ["api", "database", "redis", "workers", "embedding_model"]


def states(body: dict) -> dict[str, str]:
    return {c["name"]: c["state"] for c in body["components"]}


class TestComponents:
    async def test_each_component_with_its_state_beside_the_old_fields(
        self, client: httpx.AsyncClient, redis_url: str
    ) -> None:
        body = (await client.get("/v1/status")).json()
        # What /v1/status always said is still there.
        assert body["status"] == "ok" and body["database"]["ok"] and body["redis"] == {"configured": True, "ok": True}
        assert [c["name"] for c in body["components"]] == COMPONENTS
        # Redis answers but no RQ worker is registered: jobs would wait, so the service is degraded.
        assert states(body) == {
            "api": "operational",
            "database": "operational",
            "redis": "operational",
            "workers": "degraded",
            "embedding_model": "operational",
        }
        assert body["state"] == "degraded"
        workers = body["components"][3]
        assert workers["workers"] == 0 and workers["queued"] >= 0
        assert body["components"][4]["detail"] == "sentence-transformers/all-MiniLM-L6-v2"

    async def test_a_registered_worker_makes_it_operational(self, client: httpx.AsyncClient, redis_url: str) -> None:
        import redis

        # Where a running `memvault worker` (RQ) registers itself.
        redis.Redis.from_url(redis_url).sadd("rq:workers", "rq:worker:status-test")
        body = (await client.get("/v1/status")).json()
        assert states(body)["workers"] == "operational" and body["state"] == "operational"
        assert body["components"][3]["workers"] == 1

    async def test_without_redis_jobs_run_in_process(
        self, settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder
    ) -> None:
        async with app_client(settings, pg_urls, embedder, redis_url=None) as c:
            body = (await c.get("/v1/status")).json()
        assert [c["name"] for c in body["components"]] == ["api", "database", "jobs", "workers", "embedding_model"]
        assert body["components"][2]["label"] == "In-process jobs"
        assert body["state"] == "operational"
        assert body["components"][3]["workers"] == settings.job_threads

    async def test_redis_that_refuses_shows_degraded(
        self, settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder
    ) -> None:
        # A closed loopback port: the machine's Redis is left alone.
        async with app_client(settings, pg_urls, embedder, redis_url=f"redis://127.0.0.1:{free_port()}/0") as c:
            body = (await c.get("/v1/status")).json()
            page = await c.get("/status")
        assert body["status"] == "degraded" and body["state"] == "degraded"
        assert states(body)["redis"] == "down" and states(body)["database"] == "operational"
        assert "Some systems degraded" in page.text


async def add(api: NamespaceAPI, at: datetime, state: str, degraded: list[str] = []) -> None:  # noqa: B006
    async with api._db.unscoped() as s:
        await repo.add_sample(s, at, state, degraded)


class TestHistory:
    async def test_days_and_degraded_periods_from_the_samples(
        self, api: NamespaceAPI, client: httpx.AsyncClient
    ) -> None:
        day = (datetime.now(UTC) - timedelta(days=20)).replace(hour=10, minute=0, second=0, microsecond=0)
        for i in range(5):
            await add(api, day + timedelta(minutes=i), "operational")
        # Two runs: 10:05-10:07 Redis and the workers, 10:30 the workers alone.
        for i in range(5, 8):
            await add(api, day + timedelta(minutes=i), "degraded", ["redis", "workers"])
        await add(api, day + timedelta(minutes=30), "degraded", ["workers"])
        # A second sample of a minute (another scheduler) does not count twice.
        await add(api, day + timedelta(minutes=30), "operational")

        api._forget_cached()  # the page's 10 s cache: these samples were added behind its back
        body = (await client.get("/v1/status/history")).json()
        assert len(body["days"]) == 90
        assert body["days"][-1]["day"] == datetime.now(UTC).date().isoformat()
        entry = next(d for d in body["days"] if d["day"] == day.date().isoformat())
        assert entry == {"day": day.date().isoformat(), "samples": 9, "degraded": 4, "down": 0, "uptime": 5 / 9}
        periods = [p for p in body["degraded_periods"] if p["start"].startswith(day.date().isoformat())]
        assert [(p["minutes"], p["state"], p["components"]) for p in periods] == [
            (1, "degraded", ["workers"]),
            (3, "degraded", ["redis", "workers"]),
        ]
        assert datetime.fromisoformat(periods[1]["start"]) == day + timedelta(minutes=5)
        assert datetime.fromisoformat(periods[1]["end"]) == day + timedelta(minutes=7)
        # A day nobody sampled says so rather than claiming uptime.
        empty = next(d for d in body["days"] if d["day"] == (day - timedelta(days=1)).date().isoformat())
        assert empty["samples"] == 0 and empty["uptime"] is None

    async def test_the_in_process_tick_samples_and_prunes(self, api: NamespaceAPI) -> None:
        old = datetime.now(UTC) - timedelta(days=91)
        await add(api, old, "operational")
        task = asyncio.create_task(schedule.sample_in_process(api, 3600))
        try:
            minute = datetime.now(UTC).replace(second=0, microsecond=0)
            for _ in range(100):
                history = await api.status_history()
                if history.days[-1].samples:
                    break
                await asyncio.sleep(0.05)
        finally:
            task.cancel()
        assert history.days[-1].samples >= 1
        assert minute.date() == history.days[-1].day
        # What is older than 90 days went with the tick.
        async with api._db.unscoped() as s:
            assert old.date() not in [d[0] for d in await repo.days(s, old - timedelta(minutes=1))]

    async def test_the_rq_sample_job_records_this_minute(
        self, settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder, api: NamespaceAPI
    ) -> None:
        result = await schedule._sample(JobContext(settings, pg_urls, embedder))
        assert result["state"] in ("operational", "degraded")
        async with api._db.unscoped() as s:
            since = datetime.now(UTC) - timedelta(minutes=2)
            assert sum(d[1] for d in await repo.days(s, since)) >= 1


class TestLatency:
    def test_percentiles_are_bucket_upper_bounds(self) -> None:
        assert bucket_of(0.2) == 0 and bucket_of(10**9) == len(BOUNDS_MS) - 1
        h = {bucket_of(10): 90, bucket_of(200): 10}
        assert percentile(h, 0.5) == BOUNDS_MS[bucket_of(10)] >= 10
        assert percentile(h, 0.95) == BOUNDS_MS[bucket_of(200)] >= 200
        assert BOUNDS_MS[bucket_of(200)] <= 200 * 1.25
        assert percentile({}, 0.5) is None

    async def test_rest_searches_and_writes_are_timed_per_door(
        self, api: NamespaceAPI, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        api._forget_cached()
        before = {(x.window, x.door, x.kind): x.calls for x in await api.status_latency()}
        await store(client, tenant_a, "Ana prefers green tea")
        r = await client.post(
            f"/v1/namespaces/{tenant_a.namespace}/search", json={"query": "tea"}, headers=tenant_a.headers
        )
        assert r.status_code == 200, r.text
        await api._latency.flush()
        api._forget_cached()
        after = {(x.window, x.door, x.kind): x for x in await api.status_latency()}
        for kind in ("search", "write"):
            for window in ("hour", "day"):
                assert after[(window, "rest", kind)].calls == before[(window, "rest", kind)] + 1
            assert after[("hour", "rest", kind)].p95_ms is not None
        assert after[("hour", "mcp", "search")].calls == before[("hour", "mcp", "search")]

    async def test_each_door_is_its_own_row(
        self,
        api: NamespaceAPI,
        client: httpx.AsyncClient,
        base_url: str,
        tenant_a: Tenant,
    ) -> None:
        api._forget_cached()
        before = {(x.door, x.kind): x.calls for x in await api.status_latency() if x.window == "hour"}
        async with mcp_session(base_url, tenant_a.key) as s:
            await call(s, "memory_store", content="Standup is at 9:30")
            await call(s, "memory_search", query="standup")
            await call(s, "memory_search", query="when is standup")
        # The SDK names itself in its User-Agent.
        sdk = {**tenant_a.headers, "User-Agent": "memvault-sdk/0.1.0"}
        r = await client.post(f"/v1/namespaces/{tenant_a.namespace}/search", json={"query": "standup"}, headers=sdk)
        assert r.status_code == 200, r.text
        await api._latency.flush()
        api._forget_cached()
        after = {(x.door, x.kind): x.calls for x in await api.status_latency() if x.window == "hour"}
        grew = {k: after[k] - before[k] for k in after if after[k] != before[k]}
        assert grew == {("mcp", "write"): 1, ("mcp", "search"): 2, ("sdk", "search"): 1}


class TestPage:
    async def test_headers_and_nothing_about_tenants(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await store(client, tenant_a, "Ana prefers green tea")
        r = await client.get("/status")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        csp = r.headers["content-security-policy"]
        assert "script-src" not in csp and "default-src 'none'" in csp and "style-src 'self'" in csp
        assert "<script" not in r.text and 'href="/static/memvault.css"' in r.text
        for secret in (tenant_a.name, tenant_a.namespace, str(tenant_a.id), "green tea"):
            assert secret not in r.text
            assert secret not in (await client.get("/v1/status/history")).text
        css = await client.get("/static/memvault.css")
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        assert (await client.get("/static/../app.py")).status_code == 404
        assert (await client.get("/static/other.css")).status_code == 404


async def test_history_and_latency_are_read_once_per_interval(api: NamespaceAPI) -> None:
    """The page is public: a burst of visitors reads the tables once, not once each."""
    api._forget_cached()
    first = await asyncio.gather(*(api.status_history() for _ in range(5)))
    assert all(h is first[0] for h in first)
    await add(api, datetime.now(UTC) - timedelta(days=3), "degraded", ["redis"])
    assert await api.status_history() is first[0]  # within the 10 s
    # A sample taken by this process's tick shows at once.
    await api.record_health_sample()
    assert await api.status_history() is not first[0]
