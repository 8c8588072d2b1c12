"""Handing committed jobs to runners: RQ queues when Redis is configured, else a thread pool
inside the server running the same job function. Both only pass ids; the row holds the rest.

PostgreSQL is the outbox: a job is committed first and handed on after, and a hand-off that fails
(Redis down) or is lost (Redis restarted empty, a worker killed) leaves the row `queued` or
`running`. A periodic sweep (``sweep``) finds such rows that no queue holds and no runner runs, and
dispatches them again; running a job twice is harmless (jobs/service.py: one runner at a time,
finished jobs are never run again)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from memvault.config import Settings
from memvault.db.session import Database
from memvault.db.urls import DatabaseUrls
from memvault.embeddings import Embedder
from memvault.errors import DatabaseUnavailable
from memvault.jobs import QUEUES, queue_for
from memvault.jobs.runner import REQUEST_ID_META, JobContext, LoopBoundEmbedder, execute, orphaned_jobs
from memvault.observability import logs

log = logging.getLogger(__name__)

RUN_JOB = "memvault.jobs.runner.run_job"
SWEEP_KEY = "memvault:jobs:sweep"
# Kept in Redis for inspection with rq's own tools; the jobs table keeps them for good.
FAILED_TTL_S = 7 * 24 * 3600
# An enqueue must not hold a request for long when Redis does not answer: the job waits in
# PostgreSQL for the sweep instead.
CONNECT_TIMEOUT_S = 2.0


def backoff_s(settings: Settings, retry: int) -> float:
    """Wait before retry number ``retry`` (0 = the first): 10 s, 40 s, 160 s ... by default."""
    return settings.job_retry_backoff_s * 4**retry


class RQDispatcher:
    """Enqueues job ids on RQ queues over one Redis connection pool (not a connection per job)."""

    def __init__(self, settings: Settings) -> None:
        from redis import Redis
        from rq import Queue

        self._settings = settings
        self._conn = Redis.from_url(settings.redis_url or "", socket_connect_timeout=CONNECT_TIMEOUT_S)
        self._queues = {name: Queue(name, connection=self._conn) for name in QUEUES}

    def queue(self, name: str) -> Any:
        return self._queues[name]

    def enqueue(self, tenant_id: uuid.UUID, job_id: uuid.UUID, kind: str, *, recovery: bool = False) -> None:
        """Put the job on its queue. The first enqueue uses the job's own id as the RQ job id, so a
        cancel can find it there; a recovery re-enqueue gets the job's id and a fresh suffix, since
        the first RQ job may still exist (started by a worker that died) and must not be
        overwritten, while the sweep must still tell which job an RQ job carries."""
        from rq import Retry

        s = self._settings
        retries = s.job_max_attempts - 1
        rid = logs.current_request_id()  # dispatch's to_thread carries the request's context here
        self._queues[queue_for(kind)].enqueue(
            RUN_JOB,
            str(tenant_id),
            str(job_id),
            job_id=f"{job_id}_{uuid.uuid4().hex[:8]}" if recovery else str(job_id),
            retry=Retry(max=retries, interval=[int(backoff_s(s, i)) for i in range(retries)]) if retries else None,
            job_timeout=s.job_timeout_s,
            failure_ttl=FAILED_TTL_S,
            description=f"memvault {kind} {job_id}",
            meta={REQUEST_ID_META: rid} if rid else None,
        )

    def remove(self, job_id: uuid.UUID) -> bool:
        """Cancel the job's RQ job if it still waits (on its queue, or scheduled for a retry).
        Returns whether there was one to cancel; a started one is left to stop cooperatively."""
        from rq.exceptions import InvalidJobOperation, NoSuchJobError
        from rq.job import Job as RQJob
        from rq.job import JobStatus as RQStatus

        try:
            rq_job = RQJob.fetch(str(job_id), connection=self._conn)
        except NoSuchJobError:
            return False
        if rq_job.get_status() not in (RQStatus.QUEUED, RQStatus.SCHEDULED, RQStatus.DEFERRED):
            return False
        try:
            rq_job.cancel()
        except InvalidJobOperation:  # cancelled meanwhile
            return False
        return True

    def waiting(self) -> set[uuid.UUID]:
        """The jobs that some RQ job carries and that wait their turn: on a queue, scheduled for a
        retry, or deferred. (Started ones are left to their runner's lock to tell.)"""
        found: set[uuid.UUID] = set()
        for queue in self._queues.values():
            ids = [
                *queue.get_job_ids(),
                *queue.scheduled_job_registry.get_job_ids(),
                *queue.deferred_job_registry.get_job_ids(),
            ]
            for rq_id in ids:
                try:
                    found.add(uuid.UUID(rq_id[:36]))
                except ValueError:  # not one of ours (RQ's cron tick, say)
                    continue
        return found

    def take_sweep_turn(self, interval_s: float) -> bool:
        """One sweep per interval however many workers run: the first to set the key sweeps."""
        return bool(self._conn.set(SWEEP_KEY, "1", nx=True, px=max(1, int(interval_s * 900))))

    async def sweep(self, urls: DatabaseUrls, *, quiet_for: timedelta) -> int:
        """Enqueue again every orphaned job (see ``repository.orphans``) that no queue holds."""
        orphans = await orphaned_jobs(urls, quiet_for=quiet_for)
        if not orphans:
            return 0
        waiting = await asyncio.to_thread(self.waiting)
        lost = [(t, j, k) for t, j, k in orphans if j not in waiting]
        for tenant_id, job_id, kind in lost:
            await asyncio.to_thread(self.enqueue, tenant_id, job_id, kind, recovery=True)
        if lost:
            log.warning("re-enqueued %d jobs that no queue held", len(lost))
        return len(lost)

    async def dispatch(self, tenant_id: uuid.UUID, job_id: uuid.UUID, kind: str) -> None:
        from redis.exceptions import RedisError

        try:
            await asyncio.to_thread(self.enqueue, tenant_id, job_id, kind)
        except RedisError as exc:
            # The job is committed: it stays `queued` in PostgreSQL, and a worker's sweep enqueues it.
            log.warning("job %s stays queued in PostgreSQL until the sweep: enqueue failed (%s)", job_id, exc)

    async def cancel(self, job_id: uuid.UUID) -> None:
        await asyncio.to_thread(self.remove, job_id)

    async def aclose(self) -> None:
        await asyncio.to_thread(self._conn.close)


class ThreadDispatcher:
    """Runs jobs on a few threads of the server process, each in its own event loop, retrying
    with the same backoff as RQ. On shutdown, running jobs finish; jobs not started stay
    `queued` in PostgreSQL and are recovered at the next start. A job that could not run (the
    database away) is found again by the sweep."""

    def __init__(self, ctx: JobContext) -> None:
        self._ctx = ctx
        self._pool = ThreadPoolExecutor(ctx.settings.job_threads, thread_name_prefix="memvault-job")
        self._stopping = threading.Event()
        # Jobs on this pool, waiting or running: the sweep leaves them alone.
        self._pending: set[uuid.UUID] = set()
        self._sweeping: asyncio.Task[None] | None = None

    async def dispatch(self, tenant_id: uuid.UUID, job_id: uuid.UUID, kind: str) -> None:
        if not self._stopping.is_set() and job_id not in self._pending:
            self._pending.add(job_id)
            # In the dispatching request's context: the job's log lines carry its request id.
            self._pool.submit(contextvars.copy_context().run, self._run, tenant_id, job_id)

    async def cancel(self, job_id: uuid.UUID) -> None:
        return None  # when its thread reaches it, the claim finds it cancelled and skips it

    def _run(self, tenant_id: uuid.UUID, job_id: uuid.UUID) -> None:
        retry = 0
        try:
            while not self._stopping.is_set():
                try:
                    outcome = execute(self._ctx, tenant_id, job_id)
                except DatabaseUnavailable:
                    log.warning("job %s could not run: the database is not reachable; the sweep retries it", job_id)
                    return
                except Exception:  # the row could not even record it: it stays for the sweep
                    log.exception("job %s could not run; the sweep dispatches it again", job_id)
                    return
                if not outcome.retry or self._stopping.wait(backoff_s(self._ctx.settings, retry)):
                    return
                retry += 1
        finally:
            self._pending.discard(job_id)

    async def sweep(self, *, quiet_for: timedelta) -> int:
        """Dispatch the jobs left queued or running that this pool does not hold."""
        left = [job for job in await orphaned_jobs(self._ctx.urls, quiet_for=quiet_for) if job[1] not in self._pending]
        for tenant_id, job_id, kind in left:
            await self.dispatch(tenant_id, job_id, kind)
        return len(left)

    async def recover(self) -> int:
        """Dispatch the jobs a stopped server left queued or running."""
        return await self.sweep(quiet_for=timedelta(0))

    def start_sweeping(self, interval_s: float) -> None:
        async def every() -> None:
            while True:
                await asyncio.sleep(interval_s)
                try:
                    n = await self.sweep(quiet_for=timedelta(seconds=interval_s))
                except DatabaseUnavailable:
                    log.warning("job sweep skipped: the database is not reachable")
                    continue
                except Exception:  # the next sweep tries again
                    log.warning("job sweep failed", exc_info=True)
                    continue
                if n:
                    log.warning("dispatched %d jobs again that no runner held", n)

        self._sweeping = asyncio.create_task(every(), name="memvault-job-sweep")

    async def aclose(self) -> None:
        self._stopping.set()
        if self._sweeping is not None:
            self._sweeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeping
        # Off the loop: a running job still calls the embedder through it.
        await asyncio.to_thread(self._pool.shutdown, wait=True, cancel_futures=True)


Dispatcher = RQDispatcher | ThreadDispatcher


async def start_dispatcher(settings: Settings, db: Database, embedder: Embedder) -> Dispatcher:
    """The dispatcher `memvault serve` uses: RQ with a Redis URL, else threads (recovering what a
    previous run left unfinished, when settings ask for it)."""
    if settings.redis_url:
        return RQDispatcher(settings)
    ctx = JobContext(settings, db.urls, LoopBoundEmbedder(embedder, asyncio.get_running_loop()))
    threads = ThreadDispatcher(ctx)
    if settings.job_recover_on_start:
        n = await threads.recover()
        if n:
            log.info("recovered %d unfinished jobs", n)
    if settings.job_sweep_interval_s > 0:
        threads.start_sweeping(settings.job_sweep_interval_s)
    return threads
