"""Counts kept in memory and written to PostgreSQL a few seconds later, off the request path (the
memories' access counts, usage metering): the one writer loop both share."""

from __future__ import annotations

import asyncio


class DeferredWriter:
    """A subclass holds what is pending (``pending`` > 0 while anything is) and writes it in
    ``_write_pending``; ``_wake`` after recording starts a writer that writes every ``interval_s``
    while anything is pending. ``flush`` writes now, ``aclose`` stops the writer and writes the rest."""

    _task_name = "memvault-deferred-writer"

    def __init__(self, *, interval_s: float) -> None:
        self._interval_s = interval_s
        self._writer: asyncio.Task[None] | None = None
        # The writer's write under way, a task of its own: its batch is already taken from what is
        # pending, so a flush waits for it, and stopping the writer must not cancel it (the batch
        # would be lost).
        self._under_way: asyncio.Task[None] | None = None

    @property
    def pending(self) -> int:
        raise NotImplementedError

    async def _write_pending(self) -> None:
        raise NotImplementedError

    async def flush(self) -> None:
        """Write what is pending now. On return everything recorded before the call has been
        written (or its write has failed), the batch the writer was writing at that moment too:
        without waiting for it, a flush found nothing pending and returned before those counts
        were in (an account's usage read right after it missed them)."""
        under_way = self._under_way
        if under_way is not None and not under_way.done() and under_way.get_loop() is asyncio.get_running_loop():
            await asyncio.shield(under_way)  # a cancelled caller must not cancel the write
        await self._write_pending()

    def _wake(self) -> None:
        if not self.pending:
            return
        loop = asyncio.get_running_loop()
        # One writer per loop; a writer of a loop that has ended (a test's, a job's) never runs.
        if self._writer is None or self._writer.done() or self._writer.get_loop() is not loop:
            self._writer = loop.create_task(self._write_later(), name=self._task_name)

    async def aclose(self) -> None:
        """Stop the writer and write what is pending."""
        writer, self._writer = self._writer, None
        if writer is not None and not writer.done() and writer.get_loop() is asyncio.get_running_loop():
            writer.cancel()  # waiting or writing: a write under way goes on, and flush waits for it
            await asyncio.gather(writer, return_exceptions=True)
        await self.flush()

    async def _write_later(self) -> None:
        loop = asyncio.get_running_loop()
        while self.pending:
            await asyncio.sleep(self._interval_s)
            self._under_way = loop.create_task(self._write_pending(), name=f"{self._task_name}-write")
            await asyncio.shield(self._under_way)
