"""Retries: a 503, a 503 after the write happened, a dropped connection and a 429 are retried
with one Idempotency-Key, and the write happens once. Faults come from FaultProxy, a real HTTP
proxy on loopback; the SDK is used as shipped."""

from __future__ import annotations

from typing import Any

import pytest

import memvault_sdk
from memvault_sdk import MemVault, ServerError
from tests.conftest import Tenant
from tests.sdk.conftest import FaultProxy, call, items

MEMORIES = "/v1/namespaces/default/memories"


def one_key(proxy: FaultProxy, method: str, path: str, attempts: int) -> str:
    seen = proxy.requests(method, path)
    assert len(seen) == attempts, seen
    keys = {s.headers.get("idempotency-key") for s in seen}
    assert len(keys) == 1 and None not in keys, keys
    return keys.pop()  # type: ignore[return-value]


@pytest.mark.parametrize("mode", ["reject", "after", "drop"])
async def test_a_write_is_retried_and_happens_once(proxied: Any, proxy: FaultProxy, mode: str) -> None:
    """reject: a 503 before the app saw it; after: a 503 once the memory was stored; drop: the
    connection closed once the memory was stored. Each time the caller gets the one memory."""
    proxy.add(mode, "POST", MEMORIES, headers={"Retry-After": "0"})
    m = await call(proxied.memories.create("Ana prefers window seats", user_id="ana"))
    stored = await items(proxied.memories.list())
    assert [x.id for x in stored] == [m.id]
    one_key(proxy, "POST", MEMORIES, attempts=2)


async def test_every_write_kind_survives_a_dropped_connection(proxied: Any, proxy: FaultProxy) -> None:
    for route in ("events", "entities", "traces", "memories/batch"):
        proxy.add("drop", "POST", f"/v1/namespaces/default/{route}")
    out = await call(proxied.events.ingest([{"role": "user", "content": "hello"}], session_id="s1"))
    await call(proxied.entities.create("Ana", type="person"))
    await call(proxied.traces.start("water the plants"))
    await call(proxied.memories.create_many([{"content": "a"}, {"content": "b"}]))
    assert (await call(proxied.sessions.get("s1"))).message_count == 1
    assert len(out.event_ids) == 1
    assert len(await items(proxied.entities.list())) == 1
    assert len(await items(proxied.traces.list())) == 1
    assert len(await items(proxied.memories.list())) == 2


async def test_a_429_is_retried_after_retry_after(proxied: Any, proxy: FaultProxy) -> None:
    proxy.add("reject", "GET", MEMORIES, status=429, headers={"Retry-After": "0"}, times=2)
    assert await items(proxied.memories.list()) == []
    assert len(proxy.requests("GET", MEMORIES)) == 3


async def test_retries_run_out(proxy: FaultProxy, tenant_a: Tenant) -> None:
    proxy.add("reject", "POST", MEMORIES, headers={"Retry-After": "0"}, times=5)
    with MemVault(api_key=tenant_a.key, base_url=proxy.url, max_retries=2) as c, pytest.raises(ServerError):
        c.memories.create("never stored")
    one_key(proxy, "POST", MEMORIES, attempts=3)


async def test_a_caller_may_choose_the_key_and_retry_itself(proxied: Any, proxy: FaultProxy) -> None:
    first = await call(proxied.memories.create("Ana runs", idempotency_key="order-42"))
    again = await call(proxied.memories.create("Ana runs", idempotency_key="order-42"))
    assert again.id == first.id
    assert {s.headers["idempotency-key"] for s in proxy.requests("POST", MEMORIES)} == {"order-42"}


async def test_creating_an_api_key_is_not_retried_once_sent(proxied: Any, proxy: FaultProxy) -> None:
    """Its secret is shown once and not stored, so a retry could not return it: the caller hears
    of the broken connection instead of getting a second key."""
    before = len(await items(proxied.keys.list()))
    proxy.add("drop", "POST", "/v1/keys")
    with pytest.raises(memvault_sdk.MemVaultConnectionError):
        await call(proxied.keys.create(name="ci"))
    assert len(proxy.requests("POST", "/v1/keys")) == 1
    assert "idempotency-key" not in proxy.requests("POST", "/v1/keys")[0].headers
    assert len(await items(proxied.keys.list())) == before + 1


async def test_reads_are_retried_without_a_key(proxied: Any, proxy: FaultProxy) -> None:
    proxy.add("drop", "POST", "/v1/namespaces/default/search")
    assert (await call(proxied.search("anything"))).results == []
    seen = proxy.requests("POST", "/v1/namespaces/default/search")
    assert len(seen) == 2 and all("idempotency-key" not in s.headers for s in seen)


async def test_a_delete_whose_answer_was_lost_reports_success(proxied: Any, proxy: FaultProxy) -> None:
    """The server deleted the memory, then the connection broke before its 204 came back. The
    retry carries the first attempt's Idempotency-Key, so the server replays that 204 instead of
    answering NotFound for a memory that is gone because of this very call."""
    m = await call(proxied.memories.create("Ana's old address"))
    path = f"{MEMORIES}/{m.id}"
    proxy.add("drop", "DELETE", path)
    assert await call(proxied.memories.delete(m.id)) is None
    one_key(proxy, "DELETE", path, attempts=2)
    assert await items(proxied.memories.list()) == []


async def test_an_update_whose_answer_was_lost_is_applied_once(proxied: Any, proxy: FaultProxy) -> None:
    """A lost PATCH answer is replayed too: the caller gets the memory its update made, and the
    history holds one update, not a second made by the retry."""
    m = await call(proxied.memories.create("Ana lives in Porto"))
    path = f"{MEMORIES}/{m.id}"
    proxy.add("drop", "PATCH", path)
    updated = await call(proxied.memories.update(m.id, content="Ana lives in Lisbon"))
    assert updated.content == "Ana lives in Lisbon"
    one_key(proxy, "PATCH", path, attempts=2)
    history = await call(proxied.memories.history(updated.id))
    assert [c.action for c in history.changes] == ["created", "updated"]
