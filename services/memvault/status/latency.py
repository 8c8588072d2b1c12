"""Search and write latency per door, measured by the server itself and shared by replicas.

A Gate (operations.py) times every search and write a door makes (REST, SDK, MCP; jobs and other
internal calls are not a customer's wait) and counts it in a per-minute histogram with fixed,
log-spaced buckets. Like usage metering (metering/meter.py), nothing is written on the request
path: the counts are added to ``latency_minutes`` every few seconds, and since every process adds
to the same buckets, p50 and p95 read from the table are those of all replicas together.

A percentile is reported as the upper bound of the bucket it falls in: at most ``RATIO`` - 1
(25 %) above the true figure, never below it.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from memvault.db.deferred import DeferredWriter
from memvault.db.session import Database
from memvault.metering.tally import current_door
from memvault.operations import Operation
from memvault.principal import Principal
from memvault.status import repository as repo

log = logging.getLogger(__name__)

WRITE_INTERVAL_S = 2.0
RATIO = 1.25
# Upper bounds in milliseconds: 1 ms, 1.25 ms, ... about 56 s; a slower call falls in the last bucket.
BOUNDS_MS: tuple[float, ...] = tuple(round(RATIO**i, 3) for i in range(50))
DOORS = ("rest", "sdk", "mcp")
KINDS = ("search", "write")

# (minute, door, kind, bucket)
Key = tuple[datetime, str, str, int]


def bucket_of(ms: float) -> int:
    return min(bisect.bisect_left(BOUNDS_MS, ms), len(BOUNDS_MS) - 1)


def percentile(histogram: Mapping[int, int], q: float) -> float | None:
    """The upper bound (ms) of the bucket holding the ``q`` quantile; None without calls."""
    total = sum(histogram.values())
    if not total:
        return None
    rank = q * total
    seen = 0
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        if seen >= rank:
            return BOUNDS_MS[bucket]
    return BOUNDS_MS[-1]


class LatencyRecorder(DeferredWriter):
    _task_name = "memvault-latency-writer"

    def __init__(self, db: Database, *, interval_s: float = WRITE_INTERVAL_S, max_pending: int = 50_000) -> None:
        super().__init__(interval_s=interval_s)
        self._db = db
        self._max_pending = max_pending
        self._pending: dict[Key, int] = {}

    @asynccontextmanager
    async def admit(self, p: Principal, op: Operation) -> AsyncIterator[None]:
        """The Gate: a call that completes is timed; one that fails is not (a 404 in a millisecond
        says nothing about how long a search takes)."""
        door = current_door()
        if op.kind not in KINDS or door not in DOORS:
            yield
            return
        started = time.perf_counter()
        yield
        self.record(door, op.kind, (time.perf_counter() - started) * 1000)

    def record(self, door: str, kind: str, ms: float, *, at: datetime | None = None) -> None:
        minute = (at or datetime.now(UTC)).replace(second=0, microsecond=0)
        key = (minute, door, kind, bucket_of(ms))
        self._pending[key] = self._pending.get(key, 0) + 1
        self._wake()

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def _write_pending(self) -> None:
        batch, self._pending = self._pending, {}
        if not batch:
            return
        rows = [
            {"minute": k[0], "door": k[1], "kind": k[2], "bucket": k[3], "calls": n} for k, n in sorted(batch.items())
        ]
        try:
            async with self._db.unscoped() as s:
                await repo.add_latencies(s, rows)
        except Exception:
            # Timings are worth less than the work they time: kept for the next write while few.
            if self.pending + len(batch) > self._max_pending:
                log.exception("could not write %d latency buckets; dropped", len(batch))
                return
            log.warning("could not write %d latency buckets; kept for the next write", len(batch), exc_info=True)
            for key, n in batch.items():
                self._pending[key] = self._pending.get(key, 0) + n
