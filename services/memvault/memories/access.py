"""Access counts written behind the searches that make them.

Every search counts an access to each memory it returns (recall frequency and recency feed
ranking, decay and promotion). Written in the search's own transaction that was its slowest step
after the statement itself: about 7 ms of a 60 ms search at 100,000 memories, because an UPDATE
that cannot stay on its page inserts the row again into every index, the HNSW graph included.
The counts are a signal, not a record: a search returns without waiting for them, and this log
writes the hits of every search in the last ``interval_s`` in one UPDATE per tenant (a memory
found ten times in that second is written once, +10).

A crash may lose the last interval's counts, never a memory; ``aclose`` writes what is pending.
Reading one memory (``take``) folds its pending count into that read's own UPDATE, so the count a
caller is shown includes its own searches on this server; a count already on its way to the
database is waited for instead (a read between a write's start and its commit saw neither).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from memvault.db.deferred import DeferredWriter
from memvault.db.session import Database
from memvault.memories import repository as repo

log = logging.getLogger(__name__)


@dataclass
class Pending:
    """Accesses to one memory not yet written: how many, and the last one's time."""

    count: int
    last: datetime


class AccessLog(DeferredWriter):
    """Accesses to memories, buffered per tenant and written every ``interval_s`` by a task on the
    event loop that recorded them. ``max_pending``: memories held at most; past it, a failed write
    drops its counts instead of keeping them for the next one (an unreachable database must not
    grow the buffer without end)."""

    _task_name = "memvault-access-log"

    def __init__(self, db: Database, *, interval_s: float, max_pending: int = 100_000) -> None:
        self._db = db
        super().__init__(interval_s=interval_s)
        self._max_pending = max_pending
        self._pending: dict[uuid.UUID, dict[uuid.UUID, Pending]] = {}
        # Batches being written, each with the future their write resolves when it ends.
        self._writing_batches: list[tuple[dict[uuid.UUID, dict[uuid.UUID, Pending]], asyncio.Future[None]]] = []

    def record(self, tenant_id: uuid.UUID, memory_ids: Iterable[uuid.UUID]) -> None:
        now = datetime.now(UTC)
        self._add(tenant_id, {memory_id: Pending(1, now) for memory_id in memory_ids})
        self._wake()

    async def take(self, tenant_id: uuid.UUID, memory_id: uuid.UUID) -> int:
        """Remove and return the pending count of one memory: its reader writes it instead. A count
        of it being written is waited for, so the reader's own UPDATE comes after it."""
        loop = asyncio.get_running_loop()
        for batch, written in list(self._writing_batches):
            if memory_id in batch.get(tenant_id, ()) and written.get_loop() is loop:
                await asyncio.shield(written)  # a cancelled reader must not cancel the write
        held = self._pending.get(tenant_id, {}).pop(memory_id, None)
        return held.count if held else 0

    def give_back(self, tenant_id: uuid.UUID, memory_id: uuid.UUID, count: int) -> None:
        """Return what ``take`` removed when the reader's write did not commit."""
        if count:
            self._add(tenant_id, {memory_id: Pending(count, datetime.now(UTC))})

    @property
    def pending(self) -> int:
        return sum(len(hits) for hits in self._pending.values())

    async def _write_pending(self) -> None:
        """Write every pending count now, one transaction per tenant."""
        batch, self._pending = self._pending, {}
        if not batch:
            return
        written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._writing_batches.append((batch, written))
        try:
            await self._write(batch)
        finally:
            self._writing_batches = [entry for entry in self._writing_batches if entry[1] is not written]
            written.set_result(None)

    async def _write(self, batch: dict[uuid.UUID, dict[uuid.UUID, Pending]]) -> None:
        for tenant_id, hits in batch.items():
            if not hits:
                continue
            try:
                # A count lost to a crash is a signal lost, not data: no need to wait for the WAL.
                async with self._db.tenant_tx(tenant_id, settings={"synchronous_commit": "off"}) as tx:
                    await repo.count_accesses(
                        tx.session,
                        tenant_id,
                        [(memory_id, held.count, held.last) for memory_id, held in sorted(hits.items())],
                    )
            except Exception:
                if self.pending + len(hits) <= self._max_pending:
                    log.warning("could not write %d access counts; kept for the next write", len(hits), exc_info=True)
                    self._add(tenant_id, hits)
                else:
                    log.exception("could not write %d access counts; dropped", len(hits))

    def _add(self, tenant_id: uuid.UUID, hits: dict[uuid.UUID, Pending]) -> None:
        held = self._pending.setdefault(tenant_id, {})
        for memory_id, new in hits.items():
            old = held.get(memory_id)
            held[memory_id] = new if old is None else Pending(old.count + new.count, max(old.last, new.last))
        if not held:
            del self._pending[tenant_id]
