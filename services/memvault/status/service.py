"""The service's own state for the status page and its JSON twins: each component now, one sample
a minute kept 90 days, and search and write latency per door. Nothing here reads a tenant's data:
the queue depth is a count over every tenant, and the tables are global (migration 0027)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from memvault import operator
from memvault.facade import FacadeBase
from memvault.status import repository as repo
from memvault.status.latency import DOORS, KINDS, percentile
from memvault.status.schemas import ComponentOut, DayOut, HistoryOut, LatencyOut, PeriodOut, State

if TYPE_CHECKING:
    from memvault.api import Health

log = logging.getLogger(__name__)

HISTORY_DAYS = 90
LATENCY_KEPT = timedelta(days=2)
MAX_PERIODS = 50
CHECK_TIMEOUT_S = 3.0
# Where RQ registers its live workers (rq.worker_registration.REDIS_WORKER_KEYS).
RQ_WORKERS_KEY = "rq:workers"
# The history and the latency figures are read at most this often per process: the page is public,
# and with 90 days of samples each read takes about 100 ms of the database (docs/operations.md).
CACHE_S = 10.0

T = TypeVar("T")


def overall(components: list[ComponentOut]) -> State:
    """Down when the database is (nothing can be served); degraded when anything else is not
    operational; else operational."""
    states = {c.name: c.state for c in components}
    if states.get("database") == "down" or states.get("api") == "down":
        return "down"
    return "operational" if all(s == "operational" for s in states.values()) else "degraded"


class StatusOps(FacadeBase):
    async def health(self) -> Health:  # NamespaceAPI's
        raise NotImplementedError

    async def status_components(self, health: Health | None = None) -> list[ComponentOut]:
        """Each component's state now, as this process sees it."""
        health = health or await self.health()
        db_kind = "embedded" if health.embedded_database else "external"
        components = [
            ComponentOut(name="api", label="API", state="operational", detail=f"version {health.version}"),
            ComponentOut(
                name="database",
                label="PostgreSQL",
                state="operational" if health.database else "down",
                detail=f"{db_kind}, answering" if health.database else f"{db_kind}, not answering",
            ),
        ]
        queued = await self._queued_jobs() if health.database else None
        waiting = "" if queued is None else f", {queued} job{'s' * (queued != 1)} queued"
        if health.redis is None:
            threads = self._settings.job_threads
            components.append(
                ComponentOut(
                    name="jobs", label="In-process jobs", state="operational", detail="no Redis: jobs run in the server"
                )
            )
            components.append(
                ComponentOut(
                    name="workers",
                    label="Background workers",
                    state="operational",
                    detail=f"{threads} job thread{'s' * (threads != 1)} in the server{waiting}",
                    workers=threads,
                    queued=queued,
                )
            )
        else:
            components.append(
                ComponentOut(
                    name="redis",
                    label="Redis",
                    state="operational" if health.redis else "down",
                    detail="answering" if health.redis else "not answering: jobs wait in PostgreSQL",
                )
            )
            workers = await self._rq_workers() if health.redis else None
            if workers is None:
                state: State = "down"
                detail = f"unknown while Redis is away{waiting}"
            elif workers == 0:
                state, detail = "degraded", f"no worker running: jobs wait{waiting}"
            else:
                state, detail = "operational", f"{workers} worker{'s' * (workers != 1)}{waiting}"
            components.append(
                ComponentOut(
                    name="workers",
                    label="Background workers",
                    state=state,
                    detail=detail,
                    workers=workers,
                    queued=queued,
                )
            )
        components.append(
            ComponentOut(
                name="embedding_model", label="Embedding model", state="operational", detail=health.embedding_model
            )
        )
        return components

    async def _cached(self, key: str, compute: Callable[[], Awaitable[T]]) -> T:
        """``compute()``'s result, shared by every caller for CACHE_S seconds; callers arriving
        while it runs wait for the same run instead of starting their own."""
        cache: dict[str, tuple[float, asyncio.Task[Any]]] = self.__dict__.setdefault("_status_cache", {})
        loop = asyncio.get_running_loop()
        held = cache.get(key)
        if held is None or time.monotonic() - held[0] >= CACHE_S or held[1].get_loop() is not loop:

            async def run() -> T:
                return await compute()

            held = (time.monotonic(), loop.create_task(run(), name=f"memvault-status-{key}"))
            cache[key] = held
        try:
            return await asyncio.shield(held[1])
        except Exception:
            if cache.get(key) is held:  # the next caller tries again
                del cache[key]
            raise

    def _forget_cached(self) -> None:
        self.__dict__.get("_status_cache", {}).clear()

    async def _queued_jobs(self) -> int | None:
        """Jobs waiting, all tenants together; read as the owner, whose pool is small and serves
        sign-ups: shared for CACHE_S seconds like the history, whatever the page's traffic."""

        async def count() -> int:
            async with asyncio.timeout(CHECK_TIMEOUT_S):
                return sum((await operator.queued_jobs_by_kind(self._db)).values())

        try:
            return await self._cached("queued", count)
        except Exception:
            log.warning("could not count the queued jobs", exc_info=True)
            return None

    async def _rq_workers(self) -> int | None:
        try:
            async with asyncio.timeout(CHECK_TIMEOUT_S):
                return int(await self._redis.scard(RQ_WORKERS_KEY))
        except Exception:
            return None

    async def record_health_sample(self, *, now: datetime | None = None) -> dict[str, Any]:
        """The scheduler's sample of this minute (the first one stands), and the pruning of what is
        older than the status page shows."""
        now = now or datetime.now(UTC)
        components = await self.status_components()
        state = overall(components)
        degraded = [c.name for c in components if c.state != "operational"]
        async with self._db.unscoped() as s:
            added = await repo.add_sample(s, now, state, degraded)
            await repo.prune_samples(s, now - timedelta(days=HISTORY_DAYS))
            await repo.prune_latencies(s, now - LATENCY_KEPT)
        self._forget_cached()
        return {"minute": now.replace(second=0, microsecond=0).isoformat(), "state": state, "recorded": added}

    async def status_history(self, *, now: datetime | None = None) -> HistoryOut:
        """The last 90 UTC days (today included), a day per entry, and the periods not operational
        (up to CACHE_S seconds old)."""
        if now is None:
            return await self._cached("history", lambda: self._history(datetime.now(UTC)))
        return await self._history(now)

    async def _history(self, now: datetime) -> HistoryOut:
        first = (now - timedelta(days=HISTORY_DAYS - 1)).date()
        since = datetime(first.year, first.month, first.day, tzinfo=UTC)
        async with self._db.unscoped() as s:
            found = {d[0]: d for d in await repo.days(s, since)}
            periods = await repo.degraded_periods(s, since, limit=MAX_PERIODS)
        days = []
        for i in range(HISTORY_DAYS):
            day = first + timedelta(days=i)
            _, samples, degraded, down = found.get(day, (day, 0, 0, 0))
            uptime = (samples - degraded - down) / samples if samples else None
            days.append(DayOut(day=day, samples=samples, degraded=degraded, down=down, uptime=uptime))
        return HistoryOut(
            since=first,
            days=days,
            degraded_periods=[
                PeriodOut(start=a, end=b, minutes=n, state=st, components=names) for a, b, n, st, names in periods
            ],
        )

    async def status_latency(self, *, now: datetime | None = None) -> list[LatencyOut]:
        """p50 and p95 of searches and writes per door over the last hour and the last day, all
        replicas together (what they have written: up to a few seconds late, and CACHE_S more)."""
        if now is None:
            return await self._cached("latency", lambda: self._latency_now(datetime.now(UTC)))
        return await self._latency_now(now)

    async def _latency_now(self, now: datetime) -> list[LatencyOut]:
        out = []
        for window, span in (("hour", timedelta(hours=1)), ("day", timedelta(days=1))):
            async with self._db.unscoped() as s:
                histograms = await repo.latency_histograms(s, now - span)
            for door in DOORS:
                for kind in KINDS:
                    h = histograms.get((door, kind), {})
                    out.append(
                        LatencyOut(
                            door=door,
                            kind=kind,
                            window=window,
                            calls=sum(h.values()),
                            p50_ms=percentile(h, 0.5),
                            p95_ms=percentile(h, 0.95),
                        )
                    )
        return out
