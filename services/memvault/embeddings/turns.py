"""Fair turns at the one embedding model: tenants take turns, and so do the calls of one tenant.

The model runs one batch slice at a time (on 2 cores, two batches at once only thrash; search
queries run beside it on their own, embeddings/microbatch.py). A caller cuts its work into short
slices and asks for a turn per slice. A turn goes round-robin across tenants, and within a tenant
across its calls, so a 1,000-text import holds the model for one slice at a time and another
tenant's two texts wait for at most one slice, not for the whole import.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


class FairTurns:
    def __init__(self) -> None:
        # Owners in round-robin order, each with its callers waiting for a turn. The owner whose
        # turn it is keeps its place (an empty line, if it has no one else waiting) and goes to
        # the back when the turn ends, so the caller that just ran asks again from there.
        self._lines: dict[Hashable, deque[asyncio.Future[None]]] = {}
        self._running: Hashable | None = None
        self._busy = False

    @property
    def waiting(self) -> int:
        """How many turns are asked for and not yet given (for tests and metrics)."""
        return sum(len(q) for q in self._lines.values())

    async def run(self, owner: Hashable, fn: Callable[..., T], *args: object) -> T:
        """Run ``fn(*args)`` on a worker thread in ``owner``'s next turn.

        The turn ends when the thread does, even when the caller is cancelled meanwhile (a client
        that went away): the thread cannot be stopped, and the next slice must not run beside it."""
        await self._acquire(owner)
        try:
            work = asyncio.ensure_future(asyncio.to_thread(fn, *args))
        except BaseException:
            self._release()
            raise
        work.add_done_callback(self._finished)
        return await asyncio.shield(work)

    def _finished(self, work: asyncio.Future[Any]) -> None:
        if not work.cancelled():
            work.exception()  # retrieved here too: a cancelled caller no longer awaits it
        self._release()

    async def _acquire(self, owner: Hashable) -> None:
        line = self._lines.setdefault(owner, deque())
        if not self._busy:
            self._busy, self._running = True, owner
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        line.append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._release()  # given the turn just as the caller was cancelled: pass it on
            elif turn in line:
                line.remove(turn)
            raise

    def _release(self) -> None:
        finished = self._running
        if finished in self._lines:
            self._lines[finished] = self._lines.pop(finished)  # to the back of the round
        for owner in list(self._lines):
            line = self._lines[owner]
            while line and line[0].done():
                line.popleft()  # cancelled while waiting
            if line:
                self._running = owner
                line.popleft().set_result(None)  # the model stays busy: it passes to this turn
                return
            if owner != finished:
                del self._lines[owner]  # an owner with no one waiting gives up its place
        self._lines.clear()
        self._busy, self._running = False, None
