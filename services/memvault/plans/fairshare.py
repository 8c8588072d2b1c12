"""Fair shares of a server process between tenants: a bounded number of operations run at once,
and a freed place goes to the tenant that has the fewest running, not to whoever asked first.

A plan's concurrency cap (plans/concurrency.py) bounds how much of the service one tenant can
hold, but a tenant at its cap still holds that much: with first-come admission, another tenant's
search runs beside all of it and waits on the same cores, and a tenant with no cap can take the
whole process. Here, past ``slots`` operations at once, an operation waits in its tenant's line;
when one ends, its place goes to the tenant with a waiter that runs the fewest operations (the
longest unserved among equals). A tenant with a hundred operations queued gets one place per
round, and a tenant that had none running gets the next free place: its search waits for one
operation to end, not for the flood ahead of it. One tenant never holds every place: the last one
is kept for another tenant, so a newcomer to a process that one tenant keeps busy starts at once,
beside that tenant's work instead of after it.

The place covers the whole operation (its queries in PostgreSQL, its embedding, its Python): the
CPU it shares is all of those, and an operation cut in parts would hold database connections and
locks while it waits for its next part. Slots default to the cores and one: the cores kept busy
(one operation's Python beside another's PostgreSQL), plus the place kept for another tenant, so
a newcomer shares the cores with as few operations as keep them busy. On 2 cores, twice the cores
(4) measured hardly better for the other tenant than no fair share at all
(loadtests/bench_tenant_fairness.py fairness; figures in docs/benchmarks.md).

A wait is bounded: past ``wait_s`` the operation is refused with ``503 overloaded`` and
``Retry-After``, as the process-wide admission does (gateway/admission.py), and never hangs; and
a tenant with ``line`` operations waiting (the facade: half of MEMVAULT_MAX_IN_FLIGHT) is refused
at once, so one tenant's flood (on a plan with no concurrency cap) cannot fill the process's
admission either.
Jobs and the CLI (a Principal with no door credential) do not take places: they run in their
own processes or on their own event loops, have no client to answer a 503, and are paced by
their own thread pools.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import uuid
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from memvault.errors import Overloaded
from memvault.operations import Operation
from memvault.principal import Principal


def default_slots() -> int:
    return (os.cpu_count() or 1) + 1


class FairShare:
    """The Gate (operations.py). Lives on one event loop at a time: the loop of the server."""

    def __init__(self, slots: int, *, wait_s: float, line: int | None = None) -> None:
        self.slots = slots
        # The most operations of one tenant that wait; more are refused at once (default: slots).
        self._line = line or slots
        # The most one tenant holds: all but one place, the one kept for another tenant.
        self._most = max(1, slots - 1)
        self._wait_s = wait_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reset()

    def _reset(self) -> None:
        self._free = self.slots
        # Per tenant: its operations running, and its waiters in order of arrival.
        self._running: dict[uuid.UUID, int] = {}
        self._lines: dict[uuid.UUID, deque[asyncio.Future[None]]] = {}
        # When each tenant with something running or waiting was last given a place.
        self._served: dict[uuid.UUID, int] = {}
        self._clock = itertools.count()

    @property
    def waiting(self) -> int:
        """Operations waiting for a place (for tests and metrics)."""
        return sum(1 for line in self._lines.values() for f in line if not f.done())

    def running(self, tenant_id: uuid.UUID) -> int:
        return self._running.get(tenant_id, 0)

    @asynccontextmanager
    async def admit(self, p: Principal, op: Operation) -> AsyncIterator[None]:
        if p.credential is None or not self.slots:
            yield
            return
        await self._acquire(p.tenant_id)
        try:
            yield
        finally:
            self._release(p.tenant_id)

    async def _acquire(self, tenant: uuid.UUID) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # Left by an event loop that has ended (the tests run one per test): its operations are gone.
            self._loop = loop
            self._reset()
        if self._free > 0 and self.running(tenant) < self._most:
            # A free place while others wait can only be kept for another tenant: theirs are at their most.
            self._free -= 1
            self._grant(tenant)
            return
        line = self._lines.setdefault(tenant, deque())
        queued = sum(not f.done() for f in line)
        if queued >= self._line:
            raise Overloaded(
                f"This tenant already has {queued} operations waiting for their turn in this server "
                "process; retry shortly."
            )
        place: asyncio.Future[None] = loop.create_future()
        line.append(place)
        try:
            async with asyncio.timeout(self._wait_s):
                await place
        except BaseException as exc:
            if place.done() and not place.cancelled():
                # Given a place just as the wait ended: it is this operation's, so pass it on.
                self._release(tenant)
            else:
                place.cancel()
                self._forget(tenant)
            if isinstance(exc, TimeoutError):
                raise Overloaded(
                    f"This server process runs {self.slots} operations at once and this one waited "
                    f"{self._wait_s:g} s for its turn; retry shortly."
                ) from None
            raise

    def _grant(self, tenant: uuid.UUID) -> None:
        self._running[tenant] = self._running.get(tenant, 0) + 1
        self._served[tenant] = next(self._clock)

    def _release(self, tenant: uuid.UUID) -> None:
        left = self._running.get(tenant, 0) - 1
        if left > 0:
            self._running[tenant] = left
        else:
            self._running.pop(tenant, None)
        self._forget(tenant)
        # The place goes to the waiting tenant running the fewest, the longest unserved among equals.
        while True:
            waiting = [t for t, line in self._lines.items() if line and self.running(t) < self._most]
            if not waiting:
                # At most all of them: an operation of an ended loop (see _acquire) may end late.
                self._free = min(self.slots, self._free + 1)
                return
            nxt = min(waiting, key=lambda t: (self._running.get(t, 0), self._served.get(t, -1)))
            line = self._lines[nxt]
            place = line.popleft()
            if not line:
                del self._lines[nxt]
            if place.done():  # its waiter gave up (timed out, cancelled) and is leaving
                self._forget(nxt)
                continue
            self._grant(nxt)
            place.set_result(None)
            return

    def _forget(self, tenant: uuid.UUID) -> None:
        """Drop what is kept of a tenant with nothing running or waiting any more."""
        line = self._lines.get(tenant)
        if line is not None:
            while line and line[0].done():
                line.popleft()
            if not line:
                del self._lines[tenant]
                line = None
        if line is None and tenant not in self._running:
            self._served.pop(tenant, None)
