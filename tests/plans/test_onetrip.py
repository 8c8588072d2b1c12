"""A limited request is admitted in one Redis round trip (plans/onetrip.py), with the `limits`
library's own sliding-window arithmetic on the library's own keys, and its concurrency slot is
given back after the answer without a client ever finding its own slot still taken."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from memvault.api import NamespaceAPI
from memvault.plans.onetrip import ADMITTED, KEY_REFUSED, TENANT_REFUSED, OneTrip
from memvault.ratelimit import RateLimiter
from tests.conftest import make_tenant
from tests.plans.test_rate_limits import limited, search


async def test_counts_agree_with_the_librarys_own_window_stats(redis_url: str) -> None:
    store = Redis.from_url(redis_url)
    library = RateLimiter(redis_url, prefix="memvault:plan")
    trip = OneTrip(store)
    tenant, key = uuid.uuid4(), "mv_credential"
    try:
        # The library counts two, the script three more: one count, on the same keys.
        assert await library.count("key-search", 5, key) and await library.count("tenant-search", 7, str(tenant))
        assert await library.count("key-search", 5, key) and await library.count("tenant-search", 7, str(tenant))
        outcomes = []
        for _ in range(4):
            got = await trip.admit(tenant, key, "search", 5, 7, None, lease_ms=1000, lease_id="")
            outcomes.append(got.outcome)
            assert got.key is not None
            theirs = await library.window("key-search", 5, key)
            assert theirs is not None and got.key.remaining == theirs.remaining
            assert abs(got.key.reset_s - theirs.reset_s) <= 1
            if got.tenant is not None:
                tenant_theirs = await library.window("tenant-search", 7, str(tenant))
                assert tenant_theirs is not None and got.tenant.remaining == tenant_theirs.remaining
        assert outcomes == [ADMITTED, ADMITTED, ADMITTED, KEY_REFUSED]
        # The refusal by the key's limit spent nothing of the tenant's: 7 - 5 counted.
        tenant_window = await library.window("tenant-search", 7, str(tenant))
        assert tenant_window is not None and tenant_window.remaining == 2
        # Refused by the tenant's limit, the library agrees too.
        other = "mv_other"
        got = await trip.admit(tenant, other, "search", 5, 7, None, lease_ms=1000, lease_id="")
        got = await trip.admit(tenant, other, "search", 5, 7, None, lease_ms=1000, lease_id="")
        got = await trip.admit(tenant, other, "search", 5, 7, None, lease_ms=1000, lease_id="")
        assert got.outcome == TENANT_REFUSED
        assert not await library.count("tenant-search", 7, str(tenant))
    finally:
        await store.aclose()


@pytest.fixture
def redis_commands(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every command any redis.asyncio client of this process sends."""
    sent: Counter[str] = Counter()
    original = Redis.execute_command

    async def counting(self: Redis, *args: Any, **options: Any) -> Any:
        sent[str(args[0]).upper()] += 1
        return await original(self, *args, **options)

    monkeypatch.setattr(Redis, "execute_command", counting)
    return sent


async def test_a_limited_request_costs_one_round_trip_before_the_call(
    api: NamespaceAPI, client: httpx.AsyncClient, redis_commands: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The next request must come within the give-back delay to carry the slot back; on a busy
    # machine 50 ms between two requests is not sure, so the delay is long here.
    monkeypatch.setattr("memvault.plans.gate.GIVE_BACK_DELAY_S", 5.0)
    t = await limited(api, "one-trip", key_searches_per_minute=50, tenant_searches_per_minute=90, concurrent_requests=2)
    assert (await search(client, t)).status_code == 200  # plan and key cached
    await api._limit_gate.aclose()
    redis_commands.clear()
    for _ in range(3):
        r = await search(client, t)
        assert r.status_code == 200
        assert r.headers["ratelimit-policy"] == '"key-search";q=50;w=60, "tenant-search";q=90;w=60'
    await api._limit_gate.aclose()  # the last slot, still waiting to be given back
    # Each slot went back with the next admission's script; only the last needed a ZREM of its own.
    assert dict(redis_commands) == {"EVALSHA": 3, "ZREM": 1}


async def test_a_slot_nothing_takes_back_is_given_back_soon(api: NamespaceAPI, client: httpx.AsyncClient) -> None:
    from memvault.plans.gate import GIVE_BACK_DELAY_S

    t = await limited(api, "give-back-soon", concurrent_requests=1)
    assert (await search(client, t)).status_code == 200
    held = f"memvault:conc:{(await api.authenticate(t.key)).tenant_id}"
    redis = api._redis

    assert await redis.zcard(held) == 1  # still counted for the other replicas, for a moment
    await asyncio.sleep(GIVE_BACK_DELAY_S * 4)
    assert await redis.zcard(held) == 0


async def test_a_slot_still_being_given_back_is_free_for_the_next_request(
    api: NamespaceAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = await limited(api, "give-back", concurrent_requests=1)
    slots = api._limit_gate._slots
    arrived = asyncio.Event()
    original = slots.give_back_all

    async def late(tenant_id: Any, lease_ids: Any) -> None:  # the ZREM is slow to reach Redis
        await arrived.wait()
        await original(tenant_id, lease_ids)

    monkeypatch.setattr(slots, "give_back_all", late)
    try:
        for _ in range(3):
            # Each answer came before its slot was given back in Redis: the next still gets one.
            assert (await search(client, t)).status_code == 200
    finally:
        arrived.set()
        await api._limit_gate.aclose()
    b = await make_tenant(api, "give-back-other")
    assert (await search(client, b)).status_code == 200


async def test_a_slot_whose_batched_give_back_is_on_its_way_is_free_for_the_next_request(
    api: NamespaceAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tenant sent nothing for a while, so its slot went into the batched give-back, whose ZREM
    # is slow to reach Redis (another connection of the pool; the next admission may arrive
    # first). A tenant at exactly its cap was refused 429 then, though it ran nothing else.
    from memvault.plans.gate import GIVE_BACK_DELAY_S

    t = await limited(api, "give-back-batched", concurrent_requests=1)
    slots = api._limit_gate._slots
    sending, arrived = asyncio.Event(), asyncio.Event()
    original = slots.give_back_all

    async def late(tenant_id: Any, lease_ids: Any) -> None:
        sending.set()
        await arrived.wait()
        await original(tenant_id, lease_ids)

    monkeypatch.setattr(slots, "give_back_all", late)
    try:
        assert (await search(client, t)).status_code == 200
        await asyncio.wait_for(sending.wait(), GIVE_BACK_DELAY_S * 100)  # the batch has the slot
        r = await search(client, t)
        assert r.status_code == 200, r.text
    finally:
        arrived.set()
        await api._limit_gate.aclose()


async def test_a_request_refused_at_the_cap_spends_no_rate(api: NamespaceAPI, client: httpx.AsyncClient) -> None:
    from tests.plans.test_rate_limits import _op

    t = await limited(api, "cap-free", key_searches_per_minute=5, concurrent_requests=1)
    p = await api.authenticate(t.key)
    async with api._limit_gate.admit(p, _op("search")):
        for _ in range(3):
            r = await search(client, t)
            assert r.status_code == 429 and "at once" in r.json()["detail"]
    await api._limit_gate.aclose()
    r = await search(client, t)  # 1 of 5 used by the held request, 1 by this one
    assert r.status_code == 200 and r.headers["ratelimit"].startswith('"key-search";r=3;')


def test_lease_ids_are_unique_across_forked_workers() -> None:
    # Lease ids are a per-process token and a count; a worker forked from a parent that already
    # imported the gate must not reuse the parent's token (two leases of one name are one slot).
    import os

    from memvault.plans.gate import _lease_id

    parent = {_lease_id() for _ in range(3)}
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first ids, to the parent
        os.write(write, " ".join(_lease_id() for _ in range(3)).encode())
        os._exit(0)
    os.close(write)
    child = set(os.read(read, 4096).decode().split())
    os.waitpid(pid, 0)
    assert len(child) == 3 and not child & parent
    assert {i[:16] for i in child} != {i[:16] for i in parent}
