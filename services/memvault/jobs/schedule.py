"""Periodic maintenance: a tick every MEMVAULT_SCHEDULER_INTERVAL_S seconds queues the organize job
of each namespace whose schedule (``settings.maintenance``) is due.

With Redis, `memvault scheduler` runs RQ's own CronScheduler, which enqueues ``run_tick`` on the
`maintenance` queue and any `memvault worker` runs it. Without Redis, `memvault serve` runs the
same tick in an asyncio task. Either way the tick is ``NamespaceAPI.queue_due_maintenance``: a
compare-and-set on the namespace row and a job key naming the run make a second scheduler, or a
retried tick, queue nothing twice.

Beside it, once a minute, the status page's health sample (``NamespaceAPI.record_health_sample``):
the same two homes (an RQ job next to ``run_tick``, or a task of `memvault serve`), and the same
protection against a second scheduler (the first sample of a minute stands).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from memvault.config import Settings
from memvault.db.session import Database
from memvault.jobs.runner import JobContext, worker_context

if TYPE_CHECKING:
    from memvault.api import NamespaceAPI

log = logging.getLogger(__name__)

QUEUE = "maintenance"
# A tick only lists and queues: minutes would mean something is wrong.
TICK_TIMEOUT_S = 300
# Kept in Redis to inspect recent ticks with rq's tools; the jobs they queued are in PostgreSQL.
TICK_RESULT_TTL_S = 3600
TICK_FAILURE_TTL_S = 24 * 3600
# One health sample a minute (status/service.py): what the status page's uptime bars are made of.
SAMPLE_INTERVAL_S = 60
SAMPLE_TIMEOUT_S = 50


def run_tick() -> dict[str, Any]:
    """The RQ job that the cron scheduler enqueues: queue the periodic maintenance that is due."""
    return asyncio.run(_tick(worker_context()))


async def _tick(ctx: JobContext) -> dict[str, Any]:
    from memvault.api import NamespaceAPI
    from memvault.jobs.dispatch import RQDispatcher

    # Unpooled, as for every job: this event loop ends with the tick.
    db = Database(ctx.urls, pooled=False)
    jobs = RQDispatcher(ctx.settings)
    try:
        api = NamespaceAPI(db, ctx.embedder, ctx.settings, jobs=jobs)
        return (await api.queue_due_maintenance()).model_dump(mode="json")
    finally:
        await jobs.aclose()
        await db.dispose()


def run_sample() -> dict[str, Any]:
    """The RQ job that the cron scheduler enqueues every minute: the status page's health sample."""
    return asyncio.run(_sample(worker_context()))


async def _sample(ctx: JobContext) -> dict[str, Any]:
    from redis.asyncio import Redis

    from memvault.api import NamespaceAPI

    db = Database(ctx.urls, pooled=False)
    redis = Redis.from_url(ctx.settings.redis_url) if ctx.settings.redis_url else None
    try:
        api = NamespaceAPI(db, ctx.embedder, ctx.settings, redis=redis)
        return await api.record_health_sample()
    finally:
        if redis is not None:
            await redis.aclose()
        await db.dispose()


def serve_scheduler(settings: Settings) -> None:
    """`memvault scheduler`: RQ's CronScheduler, enqueueing ``run_tick`` every interval until
    SIGTERM or SIGINT. One is enough; a second only makes ticks that find nothing left to queue.
    When Redis goes away RQ's loop raises; this one starts it again, backing off from 1 s to 30 s,
    instead of exiting (a tick missed meanwhile is made up by the next: due is due)."""
    import time

    from redis import Redis
    from redis.exceptions import RedisError
    from rq.cron import CronScheduler
    from rq.exceptions import StopRequested

    conn = Redis.from_url(settings.redis_url or "")
    backoff = 1.0
    while True:
        cron = CronScheduler(connection=conn, logging_level=settings.log_level.upper())
        cron.register(
            run_tick,
            QUEUE,
            interval=settings.scheduler_interval_s,
            job_timeout=TICK_TIMEOUT_S,
            result_ttl=TICK_RESULT_TTL_S,
            failure_ttl=TICK_FAILURE_TTL_S,
        )
        cron.register(
            run_sample,
            QUEUE,
            interval=SAMPLE_INTERVAL_S,
            job_timeout=SAMPLE_TIMEOUT_S,
            result_ttl=TICK_RESULT_TTL_S,
            failure_ttl=TICK_FAILURE_TTL_S,
        )
        began = time.monotonic()
        try:
            cron.start()
            return  # stopped by a signal
        except RedisError as exc:
            log.warning("scheduler lost Redis: %s; starting again in %.0f s", exc, backoff)
        try:
            # RQ's signal handlers are still installed: a stop now raises StopRequested here.
            time.sleep(backoff)
        except StopRequested:
            return
        backoff = 1.0 if time.monotonic() - began > 60 else min(backoff * 2, 30.0)


async def run_in_process(api: NamespaceAPI, interval_s: float) -> None:
    """The tick inside `memvault serve` when there is no Redis: now, then every ``interval_s``.
    The jobs it queues run on the server's job threads like any other."""
    while True:
        try:
            await api.queue_due_maintenance()
        except Exception:  # the database away for a moment, say: the next tick tries again
            log.exception("periodic maintenance tick failed")
        await asyncio.sleep(interval_s)


async def sample_in_process(api: NamespaceAPI, interval_s: float = SAMPLE_INTERVAL_S) -> None:
    """The health sample inside `memvault serve` when there is no Redis: now, then every minute."""
    while True:
        try:
            await api.record_health_sample()
        except Exception:  # the database away: this minute has no sample, which the page shows
            log.warning("could not record the health sample", exc_info=True)
        await asyncio.sleep(interval_s)
