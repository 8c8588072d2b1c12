"""Counts kept in memory and written to PostgreSQL a few seconds later, off the request path (the
memories' access counts, usage metering): the one writer loop both share."""

from __future__ import annotations

import asyncio


class DeferredWriter:
    """A subclass holds what is pending (``pending`` > 0 while anything is) and writes it in
    ``flush``; ``_wake`` after recording starts a writer that flushes every ``interval_s`` while
    anything is pending. ``aclose`` stops it and writes the rest."""

    _task_name = "memvault-deferred-writer"

    def __init__(self, *, interval_s: float) -> None:
        self._interval_s = interval_s
        self._writer: asyncio.Task[None] | None = None
        self._writing = False  # the writer is writing a batch (and must not be cancelled)

    @property
    def pending(self) -> int:
        raise NotImplementedError

    async def flush(self) -> None:
        raise NotImplementedError

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
            # Cancelled unless it is writing (waiting, or not yet started): a write under way
            # finishes, since cancelling it would lose the batch it holds.
            if not self._writing:
                writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
        await self.flush()

    async def _write_later(self) -> None:
        while self.pending:
            await asyncio.sleep(self._interval_s)
            self._writing = True
            try:
                await self.flush()
            finally:
                self._writing = False
