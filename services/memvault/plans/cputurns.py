"""Turns at the process's Python between tenants: of the operations whose database answer has come
back, the one of the tenant with the fewest operations in flight runs next.

A server process runs one piece of Python at a time (its event loop), and an operation is a chain
of such pieces between its waits on PostgreSQL. The loop runs the pieces that are ready in the
order their answers came, so a tenant with four searches in flight has four pieces queued for each
one of another tenant's: that tenant's search waits behind all of them at every step, even with
a fair share of the places (plans/fairshare.py), which orders only the operations' starts. Here an
operation holds the turn while its Python runs and gives it up while it waits on the database
(``FairConnection.wait``, the one place every query of psycopg waits); when its answer is back it
asks for the turn again, and a freed turn goes to the waiting operation whose tenant has the
fewest in flight (the longest unserved among equals). Another tenant's search then waits for at
most the one piece running, not for the flooding tenant's queue.

The turn is a priority, never a lock to wait on for long: an operation that holds it while it
awaits something else (the embedding model's thread, Redis, a pool connection another operation
holds) would keep the others from their turn, so a wait for the turn ends after ``wait_s`` and the
operation runs anyway. Work an operation spawns that outlives it (a term-statistics count) does not
take turns once the operation has ended. Jobs and the CLI (no door credential) take no turns.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import psycopg

if TYPE_CHECKING:  # db/session.py imports this module: nothing of the facade's at import
    from memvault.operations import Operation
    from memvault.principal import Principal


class Turn:
    """One operation's claim on the turn."""

    __slots__ = ("_turns", "ended", "held", "task", "tenant")

    def __init__(self, turns: CpuTurns, tenant: uuid.UUID, task: asyncio.Task[Any] | None) -> None:
        self._turns = turns
        self.tenant = tenant
        # Only the operation's own task takes turns: tasks it spawns see this object (contextvars
        # are copied) but run beside it, some after it has ended.
        self.task = task
        self.held = False
        self.ended = False

    async def take(self) -> None:
        if self.held or self.ended:
            return
        await self._turns._acquire(self)
        self.held = True

    def give_up(self) -> None:
        if self.held:
            self.held = False
            self._turns._release()


_current: ContextVar[Turn | None] = ContextVar("memvault_cpu_turn", default=None)


class CpuTurns:
    """The Gate (operations.py); ``enabled`` False makes it let everything through untouched."""

    def __init__(self, *, enabled: bool = True, wait_s: float = 0.05) -> None:
        self.enabled = enabled
        self._wait_s = wait_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reset()

    def _reset(self) -> None:
        self._busy = 0  # turns given (more than one only after a wait ran out)
        self._in_flight: dict[uuid.UUID, int] = {}
        self._lines: dict[uuid.UUID, deque[asyncio.Future[None]]] = {}
        self._served: dict[uuid.UUID, int] = {}
        self._clock = itertools.count()

    @asynccontextmanager
    async def admit(self, p: Principal, op: Operation) -> AsyncIterator[None]:
        if not self.enabled or p.credential is None or _current.get() is not None:
            yield
            return
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # left by an ended event loop (tests run one per test)
            self._loop = loop
            self._reset()
        tenant = p.tenant_id
        self._in_flight[tenant] = self._in_flight.get(tenant, 0) + 1
        turn = Turn(self, tenant, asyncio.current_task())
        token = _current.set(turn)
        try:
            await turn.take()
            yield
        finally:
            turn.ended = True
            turn.give_up()
            _current.reset(token)
            left = self._in_flight[tenant] - 1
            if left:
                self._in_flight[tenant] = left
            else:
                del self._in_flight[tenant]
                self._served.pop(tenant, None)

    async def _acquire(self, turn: Turn) -> None:
        if self._busy == 0:
            self._busy = 1
            self._served[turn.tenant] = next(self._clock)
            return
        assert self._loop is not None
        place: asyncio.Future[None] = self._loop.create_future()
        self._lines.setdefault(turn.tenant, deque()).append(place)
        try:
            async with asyncio.timeout(self._wait_s):
                await place
        except TimeoutError:
            if place.done() and not place.cancelled():
                return  # given the turn just as the wait ran out
            # Whoever holds the turn is waiting on something else: run beside it.
            self._busy += 1
        except BaseException:
            if place.done() and not place.cancelled():
                self._release()  # given the turn, and leaving: pass it on
            else:
                place.cancel()
            raise

    def _release(self) -> None:
        self._busy -= 1
        self._grant_next()

    def _grant_next(self) -> None:
        while self._busy < 1:
            waiting = [t for t, line in self._lines.items() if line]
            if not waiting:
                return
            nxt = min(waiting, key=lambda t: (self._in_flight.get(t, 0), self._served.get(t, -1)))
            line = self._lines[nxt]
            place = line.popleft()
            if not line:
                del self._lines[nxt]
            if place.done():  # its wait ran out
                continue
            self._busy += 1
            self._served[nxt] = next(self._clock)
            place.set_result(None)


class FairConnection(psycopg.AsyncConnection[Any]):
    """psycopg's connection whose every wait on the server gives up the operation's turn (above)
    and asks for it again when the answer is there."""

    async def wait(self, *args: Any, **kwargs: Any) -> Any:
        turn = _current.get()
        if turn is None or turn.ended or turn.task is not asyncio.current_task():
            return await super().wait(*args, **kwargs)
        turn.give_up()
        # A wait that fails leaves the turn given up: the operation is on its way out.
        answer = await super().wait(*args, **kwargs)
        await turn.take()
        return answer
