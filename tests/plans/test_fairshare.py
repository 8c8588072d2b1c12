"""Fair shares of a process between tenants (plans/fairshare.py): with tenant A holding every place
and more of its operations queued, tenant B's next operation is let in before A's queue; a wait
past the bound is 503 `overloaded` with Retry-After, never a hang; jobs and the CLI never queue.
Order of admission is asserted, never time (how fast is the benchmark's:
loadtests/bench_tenant_fairness.py fairness)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
import pytest

from memvault.api import NamespaceAPI
from memvault.errors import Overloaded
from memvault.operations import Operation
from memvault.plans.fairshare import FairShare
from memvault.principal import Principal
from tests.conftest import Tenant, make_tenant

SEARCH = Operation("search", "search")


def door_principal(tenant_id: uuid.UUID) -> Principal:
    """A caller with an API key, as the doors make them."""
    return Principal(tenant_id, frozenset({"read", "write"}), "key", key_id=uuid.uuid4())


async def settle(until: Callable[[], bool]) -> None:
    """Let the loop run until ``until()``: every step here is a wake-up, none a wait on time."""
    for _ in range(10_000):
        if until():
            return
        await asyncio.sleep(0)
    raise AssertionError("never settled")


class Holder:
    """Operations that stay admitted until released, recording the order they were let in."""

    def __init__(self, gate: FairShare) -> None:
        self.gate = gate
        self.admitted: list[str] = []
        self._release: dict[str, asyncio.Event] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, name: str, p: Principal) -> None:
        self._release[name] = asyncio.Event()

        async def run() -> None:
            async with self.gate.admit(p, SEARCH):
                self.admitted.append(name)
                await self._release[name].wait()

        self.tasks[name] = asyncio.create_task(run())

    async def end(self, name: str) -> None:
        self._release[name].set()
        await self.tasks[name]


async def test_a_newcomer_is_let_in_before_a_flooding_tenants_queue() -> None:
    gate = FairShare(3, wait_s=60)
    a, b, c = (door_principal(uuid.uuid4()) for _ in range(3))
    ops = Holder(gate)
    for n in range(1, 6):
        ops.start(f"a{n}", a)
    # A holds all but one place, never the last; the rest of its operations wait.
    await settle(lambda: len(ops.admitted) == 2 and gate.waiting == 3)
    assert gate.running(a.tenant_id) == 2
    ops.start("b1", b)  # B, after A's three queued operations, gets the place kept for another tenant
    await settle(lambda: len(ops.admitted) == 3)
    assert ops.admitted == ["a1", "a2", "b1"]

    ops.start("b2", b)
    ops.start("c1", c)
    await settle(lambda: gate.waiting == 5)
    await ops.end("a1")
    await settle(lambda: len(ops.admitted) == 4)
    # The freed place goes to the tenant running the fewest: C (none), not A's oldest waiter.
    assert ops.admitted[-1] == "c1"
    await ops.end("b1")
    await settle(lambda: len(ops.admitted) == 5)
    assert ops.admitted[-1] == "b2"  # B runs none now, A and C one each
    await ops.end("c1")
    await settle(lambda: len(ops.admitted) == 6)
    assert ops.admitted[-1] == "a3"  # only A waits
    for name in ("a2", "b2", "a3", "a4", "a5"):
        await ops.end(name)
    assert ops.admitted == ["a1", "a2", "b1", "c1", "b2", "a3", "a4", "a5"]
    assert gate.waiting == 0 and gate.running(a.tenant_id) == 0


async def test_a_tenant_with_a_full_line_is_refused_at_once_and_others_still_get_in() -> None:
    gate = FairShare(2, wait_s=60)
    a, b = door_principal(uuid.uuid4()), door_principal(uuid.uuid4())
    ops = Holder(gate)
    for n in range(1, 4):
        ops.start(f"a{n}", a)
    await settle(lambda: ops.admitted == ["a1"] and gate.waiting == 2)
    # As many of A's waiting as there are places: A's next is refused without waiting.
    with pytest.raises(Overloaded) as refused:
        async with gate.admit(a, SEARCH):
            raise AssertionError("admitted past a full line")
    assert refused.value.status == 503 and "waiting" in str(refused.value.detail)
    async with gate.admit(b, SEARCH):  # B takes the place A may not
        assert ops.admitted == ["a1"]
    for name in ("a1", "a2", "a3"):
        await ops.end(name)


async def test_a_wait_past_the_bound_is_503_overloaded_and_frees_its_place_in_line() -> None:
    gate = FairShare(1, wait_s=0.05)
    a, b = door_principal(uuid.uuid4()), door_principal(uuid.uuid4())
    ops = Holder(gate)
    ops.start("a1", a)
    await settle(lambda: ops.admitted == ["a1"])
    with pytest.raises(Overloaded) as refused:
        async with gate.admit(b, SEARCH):
            raise AssertionError("admitted while every place was held")
    assert refused.value.status == 503 and refused.value.code == "overloaded"
    assert refused.value.retry_after_s == 1
    assert gate.waiting == 0  # the refused waiter left its line
    await ops.end("a1")
    async with gate.admit(b, SEARCH):  # the place is free again, not leaked to the refused one
        assert gate.running(b.tenant_id) == 1


async def test_a_cancelled_waiter_passes_its_place_on() -> None:
    gate = FairShare(1, wait_s=60)
    a, b, c = (door_principal(uuid.uuid4()) for _ in range(3))
    ops = Holder(gate)
    ops.start("a1", a)
    ops.start("b1", b)
    ops.start("c1", c)
    await settle(lambda: gate.waiting == 2)
    ops.tasks["b1"].cancel()  # a client that went away while waiting
    await ops.end("a1")
    await settle(lambda: ops.admitted == ["a1", "c1"])
    await ops.end("c1")
    assert gate.waiting == 0


async def test_jobs_and_the_cli_never_wait_for_a_place() -> None:
    gate = FairShare(1, wait_s=60)
    tenant = uuid.uuid4()
    ops = Holder(gate)
    ops.start("a1", door_principal(tenant))
    await settle(lambda: ops.admitted == ["a1"])
    # A job of the same tenant (no credential: nothing to answer a 503 to) runs beside it at once.
    async with gate.admit(Principal.system(tenant, subject="job"), SEARCH):
        assert gate.waiting == 0 and gate.running(tenant) == 1
    await ops.end("a1")


# ---- through the REST door ----------------------------------------------------------------------


class Recorder:
    """A gate after the fair share: sees the order operations were let in."""

    def __init__(self) -> None:
        self.order: list[uuid.UUID] = []

    def admit(self, p: Principal, op: Operation) -> AbstractAsyncContextManager[None]:
        @asynccontextmanager
        async def entered() -> AsyncIterator[None]:
            self.order.append(p.tenant_id)
            yield

        return entered()


@pytest.fixture
def three_places(api: NamespaceAPI) -> Iterator[tuple[FairShare, Recorder]]:
    """The app's fair share swapped for one with three places, and a recorder behind it."""
    gates: list[Any] = api._gates
    saved = list(gates)
    gate, recorder = FairShare(3, wait_s=0.3), Recorder()
    at = gates.index(api._fair_share)
    gates[at : at + 1] = [gate, recorder]
    try:
        yield gate, recorder
    finally:
        gates[:] = saved


async def search(client: httpx.AsyncClient, t: Tenant) -> httpx.Response:
    return await client.post(f"/v1/namespaces/{t.namespace}/search", json={"query": "window seats"}, headers=t.headers)


async def test_over_rest_b_is_served_before_as_queue_and_a_too_long_wait_is_503(
    api: NamespaceAPI, client: httpx.AsyncClient, three_places: tuple[FairShare, Recorder]
) -> None:
    gate, recorder = three_places
    a, b = await make_tenant(api, "fair-a"), await make_tenant(api, "fair-b")
    holder = Holder(gate)
    pa = await api.authenticate(a.key)
    holder.start("a1", pa)
    holder.start("a2", pa)
    holder.start("c1", door_principal(uuid.uuid4()))
    await settle(lambda: len(holder.admitted) == 3)

    # Every place held: B's search waits the bound, then is refused as overloaded.
    r = await search(client, b)
    assert r.status_code == 503, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["code"] == "overloaded" and r.headers["retry-after"] == "1"

    # A queues two searches, then B one: when A's place frees, B's search is the next let in.
    gate._wait_s = 60
    queued = [asyncio.create_task(search(client, a)) for _ in range(2)]
    await settle(lambda: gate.waiting == 2)
    queued.append(asyncio.create_task(search(client, b)))
    await settle(lambda: gate.waiting == 3)
    # A job of B (no credential) does not queue behind any of it.
    assert (await api.list_namespaces(b.principal)) is not None
    recorder.order.clear()
    await holder.end("a1")
    answers = await asyncio.gather(*queued)
    assert [r.status_code for r in answers] == [200, 200, 200]
    assert recorder.order == [b.id, a.id, a.id]
    await holder.end("a2")
    await holder.end("c1")


async def test_with_no_places_set_nothing_waits() -> None:
    """The default (MEMVAULT_FAIR_SHARE_SLOTS=0): the gate lets every operation run at once."""
    gate = FairShare(0, wait_s=0.1)
    tenant = door_principal(uuid.uuid4())
    async with AsyncExitStack() as stack:
        for _ in range(50):
            await stack.enter_async_context(gate.admit(tenant, SEARCH))
