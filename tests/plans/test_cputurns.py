"""Turns at the process's Python between tenants (plans/cputurns.py): of the operations waiting for
the turn, the one whose tenant has the fewest in flight goes next; a wait on PostgreSQL gives the
turn up (so another operation runs meanwhile); a turn held while awaiting something else delays
the others by at most the bound, never hangs them. Order is asserted, never speed (that is the
benchmark's: loadtests/bench_tenant_fairness.py fairness, 't' after the places)."""

from __future__ import annotations

import asyncio
import uuid

from sqlalchemy import text

from memvault.api import NamespaceAPI
from memvault.plans.cputurns import CpuTurns
from memvault.principal import Principal
from tests.plans.test_fairshare import SEARCH, door_principal, settle


async def test_a_freed_turn_goes_to_the_tenant_with_the_fewest_in_flight() -> None:
    turns = CpuTurns(wait_s=30)
    a, b = door_principal(uuid.uuid4()), door_principal(uuid.uuid4())
    ran: list[str] = []
    holding = asyncio.Event()
    release = asyncio.Event()

    async def op(name: str, p: Principal, hold: bool = False) -> None:
        async with turns.admit(p, SEARCH):
            ran.append(name)
            if hold:
                holding.set()
                await release.wait()  # holds the turn, as a piece of Python would

    first = asyncio.create_task(op("a1", a, hold=True))
    await holding.wait()
    rest = [asyncio.create_task(op("a2", a)), asyncio.create_task(op("a3", a))]
    await settle(lambda: sum(len(line) for line in turns._lines.values()) == 2)
    rest.append(asyncio.create_task(op("b1", b)))
    await settle(lambda: sum(len(line) for line in turns._lines.values()) == 3)
    release.set()
    await asyncio.gather(first, *rest)
    # B came last but has one in flight against A's two: it goes first, then A's in their order.
    assert ran == ["a1", "b1", "a2", "a3"]
    assert turns._busy == 0 and not turns._in_flight and not turns._lines


async def test_a_turn_held_while_awaiting_something_else_delays_the_others_only_so_long() -> None:
    turns = CpuTurns(wait_s=0.05)
    a, b = door_principal(uuid.uuid4()), door_principal(uuid.uuid4())
    release = asyncio.Event()
    holding = asyncio.Event()

    async def holder() -> None:
        async with turns.admit(a, SEARCH):
            holding.set()
            await release.wait()  # not a database wait: the turn stays held

    held = asyncio.create_task(holder())
    await holding.wait()
    async with asyncio.timeout(5):  # the bound is 50 ms: B runs beside the holder, not after it
        async with turns.admit(b, SEARCH):
            pass
    release.set()
    await held
    assert turns._busy == 0


async def test_jobs_and_the_cli_take_no_turns_and_off_means_untouched() -> None:
    turns = CpuTurns(wait_s=30)
    holding, release = asyncio.Event(), asyncio.Event()

    async def holder() -> None:
        async with turns.admit(door_principal(uuid.uuid4()), SEARCH):
            holding.set()
            await release.wait()

    held = asyncio.create_task(holder())
    await holding.wait()
    async with asyncio.timeout(5):
        async with turns.admit(Principal.system(uuid.uuid4(), subject="job"), SEARCH):
            pass  # no door credential: straight through
        turns.enabled = False
        async with turns.admit(door_principal(uuid.uuid4()), SEARCH):
            pass
    release.set()
    await held


async def test_a_wait_on_the_database_gives_the_turn_to_another_tenant(api: NamespaceAPI) -> None:
    # A's operation runs a query that takes a while in PostgreSQL: its connection (FairConnection)
    # gives the turn up while it waits, so B runs meanwhile. Without that, B would wait for the
    # turn (30 s here) until A's operation ended.
    turns = CpuTurns(wait_s=30)
    a, b = door_principal(uuid.uuid4()), door_principal(uuid.uuid4())
    events: list[str] = []
    querying = asyncio.Event()

    async def slow() -> None:
        async with turns.admit(a, SEARCH), api._db.tenant_tx(a.tenant_id) as tx:
            querying.set()
            await tx.session.execute(text("SELECT pg_sleep(0.5)"))
            events.append("a's query answered")

    task = asyncio.create_task(slow())
    await querying.wait()
    await asyncio.sleep(0.1)  # A's statement is on its way to the server
    async with asyncio.timeout(5), turns.admit(b, SEARCH):
        events.append("b ran")
    await task
    assert events == ["b ran", "a's query answered"]
    assert turns._busy == 0
