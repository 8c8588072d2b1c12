"""A monthly cap holds exactly: what a write is about to add is taken before it runs, so writers
running at once (in one process, or in replicas sharing Redis) cannot all pass a cap that only
one more fits; what a failed write took is given back; with Redis the month's count is shared
live by every replica, and a Redis that lost it counts again from the table."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis

from memvault.api import NamespaceAPI
from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from memvault.errors import MemvaultError
from memvault.events.schemas import EventsIn
from memvault.facade import NamespaceNotFound
from memvault.metering.meter import UsageMeter
from memvault.metering.tally import count
from memvault.operations import Operation
from memvault.plans.quotas import MonthlyQuotaExceeded
from memvault.principal import Principal
from memvault.untimed import untimed_redis
from tests.conftest import make_tenant, running


def msg(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


def events(*texts: str) -> EventsIn:
    return EventsIn.model_validate({"session_id": "s1", "messages": [msg(t) for t in texts]})


@pytest.fixture
async def replica(settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder) -> AsyncIterator[Any]:
    """A second server on the same database and Redis, as another replica behind the balancer."""
    async with running(create_app(settings, urls=pg_urls, embedder=embedder)) as second:
        yield second


@pytest.fixture(params=["redis", "memory"])
async def server(
    request: pytest.FixtureRequest,
    api: NamespaceAPI,
    settings: Settings,
    pg_urls: DatabaseUrls,
    embedder: LocalEmbedder,
) -> AsyncIterator[NamespaceAPI]:
    """The suite's server (Redis on), and one with no Redis (the no-setup `memvault serve`),
    which counts in its own memory."""
    if request.param == "redis":
        yield api
        return
    local = settings.model_copy(update={"redis_url": None})
    async with running(create_app(local, urls=pg_urls, embedder=embedder)) as app:
        yield app.state.api


async def ingest_at_once(api: NamespaceAPI, p: Principal, namespace: str, n: int) -> list[str]:
    """``n`` ingests of one message each, all started before any ends; each one's outcome."""

    async def one(i: int) -> str:
        try:
            await api.ingest_events(p, namespace, events(f"message {i}"))
        except MemvaultError as exc:
            return exc.code
        return "ok"

    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def test_writers_at_once_never_pass_a_monthly_cap(server: NamespaceAPI) -> None:
    api = server
    t = await make_tenant(api, "at-once")
    await api.set_tenant_plan(t.id, "unlimited", {"events_per_month": 5})
    outcomes = await ingest_at_once(api, Principal.system(t.id), t.namespace, 12)
    assert sorted(outcomes) == ["ok"] * 5 + ["quota_exceeded"] * 7
    assert (await api._usage.month_totals(t.id))["events_ingested"] == 5
    await api._usage.flush()
    assert (await api._usage.month_totals(t.id))["events_ingested"] == 5


async def test_a_write_that_fails_gives_back_what_it_took(server: NamespaceAPI) -> None:
    api = server
    t = await make_tenant(api, "give-back")
    await api.set_tenant_plan(t.id, "unlimited", {"events_per_month": 3})
    p = Principal.system(t.id)
    for _ in range(3):
        with pytest.raises(NamespaceNotFound):
            await api.ingest_events(p, "no-such-namespace", events("one", "two"))
    assert (await api._usage.month_totals(t.id))["events_ingested"] == 0
    await api.ingest_events(p, t.namespace, events("one", "two", "three"))
    assert (await api._usage.month_totals(t.id))["events_ingested"] == 3


async def test_replicas_on_one_redis_share_the_month_before_either_writes_it(
    api: NamespaceAPI, client: httpx.AsyncClient, replica: Any
) -> None:
    t = await make_tenant(api, "replicas")
    await api.set_tenant_plan(t.id, "unlimited", {"events_per_month": 3})
    url = f"/v1/namespaces/{t.namespace}/events"
    body = {"session_id": "s1", "messages": [msg("one"), msg("two")]}
    r = await client.post(url, headers=t.headers, json=body)
    assert r.status_code in (200, 201, 202), r.text
    transport = httpx.ASGITransport(app=replica)
    async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test") as other:
        # Neither replica has written its counts to the table yet: the other one sees them anyway.
        r = await other.post(url, headers=t.headers, json=body)
        assert r.status_code == 429, r.text
        assert (r.json()["quota"], r.json()["used"], r.json()["limit"]) == ("events_per_month", 2, 3)
        r = await other.get("/v1/account", headers=t.headers)
        quotas = {q["quota"]: q for q in r.json()["quotas"]}
        assert quotas["events_per_month"]["used"] == 2
        r = await other.post(url, headers=t.headers, json={"session_id": "s1", "messages": [msg("three")]})
        assert r.status_code in (200, 201, 202), r.text
    r = await client.post(url, headers=t.headers, json={"session_id": "s1", "messages": [msg("four")]})
    assert r.status_code == 429, r.text
    assert r.json()["used"] == 3


async def test_a_redis_that_lost_the_month_counts_again_from_the_table(api: NamespaceAPI, redis_url: str) -> None:
    t = await make_tenant(api, "lost")
    await api.set_tenant_plan(t.id, "unlimited", {"events_per_month": 4})
    p = Principal.system(t.id)
    await api.ingest_events(p, t.namespace, events("one", "two", "three"))
    await api._usage.flush()
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.keys("memvault:month:*"), "the month is counted in Redis"
        client.flushdb()  # Redis restarted without its data
    finally:
        client.close()
    with pytest.raises(MemvaultError) as refused:
        await api.ingest_events(p, t.namespace, events("four", "five"))
    assert (refused.value.code, refused.value.extra["used"]) == ("quota_exceeded", 3)
    await api.ingest_events(p, t.namespace, events("four"))
    assert (await api._usage.month_totals(t.id))["events_ingested"] == 4


async def test_without_a_cap_nothing_is_taken_ahead(api: NamespaceAPI) -> None:
    t = await make_tenant(api, "uncapped")
    await api.set_tenant_plan(t.id, "unlimited", {})
    p = Principal.system(t.id)
    await api.ingest_events(p, t.namespace, events("one", "two"))
    assert (await api._usage.month_totals(t.id))["events_ingested"] == 2
    await api._usage.flush()
    assert (await api._usage.month_totals(t.id))["events_ingested"] == 2


async def test_without_a_reachable_redis_each_process_keeps_the_cap_with_its_own_count(
    api: NamespaceAPI, caplog: pytest.LogCaptureFixture
) -> None:
    t = await make_tenant(api, "no-redis")
    await api.set_tenant_plan(t.id, "unlimited", {"events_per_month": 2})
    p = Principal.system(t.id)
    # Nothing listens on port 1: every Redis call fails at once.
    away = untimed_redis("redis://127.0.0.1:1/0")
    meter = UsageMeter(api._db, api._plans, redis=away)
    op = Operation("ingest_events", "write")

    async def write(n: int) -> None:
        async with meter.admit(p, op):
            await meter.require_monthly_room(t.id, "events_per_month", adding=n)
            count(events_ingested=n)

    try:
        await write(1)
        with pytest.raises(MonthlyQuotaExceeded):
            await write(2)
        await write(1)
        assert (await meter.month_totals(t.id))["events_ingested"] == 2
        # Said once, not once a call: an outage must not flood the log.
        said = [r for r in caplog.records if "Redis" in r.getMessage()]
        assert len(said) == 1 and "not reachable in Redis" in said[0].getMessage()
        await meter.flush()
        assert (await api._usage.month_totals(t.id))["events_ingested"] == 2
    finally:
        await meter.aclose()
        await away.aclose()
