"""Rate limits and concurrency of a tenant's plan, at the REST door with real Redis: the 429 a
client gets (body, Retry-After, RateLimit headers), what is counted apart (keys, tenants, kinds),
what is never counted (jobs and the CLI, unlimited plans), and bad keys per client address."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
import redis

from memvault.api import NamespaceAPI
from memvault.keys.schemas import KeyIn
from memvault.namespaces.schemas import NamespaceIn
from memvault.retrieval.schemas import SearchIn
from tests.conftest import Tenant, make_tenant


async def limited(api: NamespaceAPI, label: str, **limits: int) -> Tenant:
    t = await make_tenant(api, label)
    await api.set_tenant_plan(t.id, "unlimited", limits)
    return t


def search(client: httpx.AsyncClient, t: Tenant, key: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {key}"} if key else t.headers
    return client.post(f"/v1/namespaces/{t.namespace}/search", json={"query": "window seats"}, headers=headers)


def read(client: httpx.AsyncClient, t: Tenant) -> Any:
    return client.get(f"/v1/namespaces/{t.namespace}/memories", headers=t.headers)


async def test_over_the_limit_is_429_with_retry_after_and_ratelimit_headers(
    api: NamespaceAPI, client: httpx.AsyncClient
) -> None:
    t = await limited(api, "rl", key_searches_per_minute=3, tenant_searches_per_minute=10)
    for remaining in (2, 1, 0):
        r = await search(client, t)
        assert r.status_code == 200, r.text
        assert r.headers["ratelimit-policy"] == '"key-search";q=3;w=60, "tenant-search";q=10;w=60'
        assert r.headers["ratelimit"].startswith(f'"key-search";r={remaining};t=')
        assert f'"tenant-search";r={7 + remaining};t=' in r.headers["ratelimit"]
    r = await search(client, t)
    assert r.status_code == 429
    assert r.headers["content-type"] == "application/problem+json"
    body = r.json()
    assert body["code"] == "rate_limited" and body["status"] == 429
    retry = int(r.headers["retry-after"])
    assert 1 <= retry <= 60 and body["retry_after"] == retry
    assert f"retry in {retry} s" in body["detail"]
    assert r.headers["ratelimit"].startswith('"key-search";r=0;t=')
    # The key was refused at its own limit: the tenant's budget for its other keys is untouched.
    assert "tenant-search" not in r.headers["ratelimit"]


async def test_keys_tenants_and_kinds_are_counted_apart(api: NamespaceAPI, client: httpx.AsyncClient) -> None:
    t = await limited(api, "rl", key_searches_per_minute=2, tenant_searches_per_minute=3, key_reads_per_minute=5)
    other_key = (await api.create_key(t.principal, KeyIn(name="second", scopes=["read"]))).key
    for _ in range(2):
        assert (await search(client, t)).status_code == 200
    assert (await search(client, t)).status_code == 429  # this key's limit
    assert (await search(client, t, other_key)).status_code == 200  # another key: the tenant's 3rd
    r = await search(client, t, other_key)
    assert r.status_code == 429 and r.headers["ratelimit"].startswith('"key-search";r=0')  # tenant full
    assert '"tenant-search";r=0' in r.headers["ratelimit"]
    # Reads are their own count, and have no tenant limit in this plan.
    r = await read(client, t)
    assert r.status_code == 200 and r.headers["ratelimit-policy"] == '"key-read";q=5;w=60'
    # Writes are not limited by this plan at all: no headers.
    r = await client.post(f"/v1/namespaces/{t.namespace}/memories", json={"content": "x"}, headers=t.headers)
    assert r.status_code == 201 and "ratelimit" not in r.headers


async def test_one_tenant_at_its_limit_does_not_limit_another(api: NamespaceAPI, client: httpx.AsyncClient) -> None:
    a = await limited(api, "rl-a", tenant_searches_per_minute=2)
    b = await limited(api, "rl-b", tenant_searches_per_minute=2)
    for _ in range(2):
        assert (await search(client, a)).status_code == 200
    assert (await search(client, a)).status_code == 429
    r = await search(client, b)
    assert r.status_code == 200 and r.headers["ratelimit"].startswith('"tenant-search";r=1;')


async def test_unlimited_plans_get_no_headers_and_cost_no_redis(
    api: NamespaceAPI, client: httpx.AsyncClient, redis_url: str
) -> None:
    t = await make_tenant(api, "rl-free-of-limits")  # the tenants operators create: plan unlimited
    store = redis.Redis.from_url(redis_url)
    for _ in range(5):
        r = await search(client, t)
        assert r.status_code == 200 and "ratelimit" not in r.headers and "ratelimit-policy" not in r.headers
    # Counting always writes its window and lease keys, and this test's Redis database is its own
    # (the server's command statistics are not: other test processes and benchmarks share them).
    assert not store.keys("memvault:plan*") and not store.keys("memvault:conc*")


async def test_jobs_and_the_cli_are_never_limited(api: NamespaceAPI) -> None:
    t = await limited(api, "rl", key_searches_per_minute=1, tenant_searches_per_minute=1, concurrent_requests=1)
    for _ in range(5):  # Principal.system: no key, no grant
        await api.search(t.principal, t.namespace, SearchIn(query="window seats"))


async def test_a_tenant_at_its_concurrency_cap_gets_429_and_others_do_not(
    api: NamespaceAPI, client: httpx.AsyncClient, redis_url: str
) -> None:
    a = await limited(api, "conc-a", concurrent_requests=1)
    b = await limited(api, "conc-b", concurrent_requests=1)
    p_a = await api.authenticate(a.key)
    release = asyncio.Event()
    entered = asyncio.Event()

    async def slow() -> None:
        async with api._limit_gate.admit(p_a, _op("search")):  # a request of A still running
            entered.set()
            await release.wait()

    holder = asyncio.create_task(slow())
    await entered.wait()
    try:
        assert redis.Redis.from_url(redis_url).zcard(f"memvault:conc:{a.id}") == 1  # shared by replicas
        r = await search(client, a)
        assert r.status_code == 429 and r.json()["code"] == "rate_limited"
        assert r.headers["retry-after"] == "1" and "at once" in r.json()["detail"]
        assert (await search(client, b)).status_code == 200
    finally:
        release.set()
        await holder
    assert (await search(client, a)).status_code == 200  # the slot was given back


def _op(kind: str) -> Any:
    from memvault.operations import Operation

    return Operation("test", kind)  # type: ignore[arg-type]


async def test_a_crashed_replica_does_not_leak_its_slots(api: NamespaceAPI, redis_url: str) -> None:
    from redis.asyncio import Redis

    from memvault.plans.concurrency import Slots

    store = Redis.from_url(redis_url)
    try:
        crashed, alive = Slots(store, lease_s=0.3), Slots(store, lease_s=30)
        tenant = uuid.uuid4()
        assert await crashed.take(tenant, 1) is not None  # taken, never given back: the process died
        assert await alive.take(tenant, 1) is None
        await asyncio.sleep(0.4)
        lease = await alive.take(tenant, 1)
        assert lease is not None
        await alive.give_back(lease)
        assert await store.zcard(f"memvault:conc:{tenant}") == 0
    finally:
        await store.aclose()


async def test_bad_keys_from_one_address_are_slowed_then_refused_but_the_owner_keeps_working(
    api: NamespaceAPI, client: httpx.AsyncClient
) -> None:
    t = await make_tenant(api, "badkey")
    bad = {"Authorization": "Bearer mv_" + "x" * 40}
    limit = int(api._settings.bad_credentials_limit_per_address.split("/")[0])
    for _ in range(limit):
        r = await client.get("/v1/namespaces", headers=bad)
        assert r.status_code == 401
    r = await client.get("/v1/namespaces", headers=bad)
    assert r.status_code == 429 and r.json()["code"] == "rate_limited"
    assert 1 <= int(r.headers["retry-after"]) <= 60
    # The same address with the real key: served, neither counted nor refused.
    assert (await client.get("/v1/namespaces", headers=t.headers)).status_code == 200
    # Another address is not slowed by this one's failures.
    other = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=client._transport.app, client=("198.51.100.7", 4000)),  # type: ignore[attr-defined]
        base_url="http://memvault.test",
    )
    async with other:
        assert (await other.get("/v1/namespaces", headers=bad)).status_code == 401


@pytest.mark.parametrize("cap", [2])
async def test_the_namespace_quota_refuses_past_the_cap(api: NamespaceAPI, client: httpx.AsyncClient, cap: int) -> None:
    t = await limited(api, "quota-ns", namespaces=cap)
    r = await client.post("/v1/namespaces", json={"name": "second"}, headers=t.headers)
    assert r.status_code == 201, r.text
    r = await client.post("/v1/namespaces", json={"name": "third"}, headers=t.headers)
    assert r.status_code == 403
    body = r.json()
    assert (body["code"], body["quota"], body["limit"], body["used"]) == ("quota_exceeded", "namespaces", 2, 2)
    names = [n.name for n in await api.list_namespaces(t.principal)]
    assert "third" not in names and len(names) == 2
    with pytest.raises(Exception, match="namespaces"):
        await api.create_namespace(t.principal, NamespaceIn(name="by-job"))  # the CLI too
