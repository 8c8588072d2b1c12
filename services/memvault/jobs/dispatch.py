"""Handing committed jobs to runners: RQ queues when Redis is configured, else a thread pool
inside the server running the same job function. Both only pass ids; the row holds the rest."""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from memvault.config import Settings
from memvault.db.session import Database
from memvault.embeddings import Embedder
from memvault.jobs import QUEUES, queue_for
from memvault.jobs.runner import JobContext, LoopBoundEmbedder, execute, unfinished_jobs

log = logging.getLogger(__name__)

RUN_JOB = "memvault.jobs.runner.run_job"
# Kept in Redis for inspection with rq's own tools; the jobs table keeps them for good.
FAILED_TTL_S = 7 * 24 * 3600


def backoff_s(settings: Settings, retry: int) -> float:
    """Wait before retry number ``retry`` (0 = the first): 10 s, 40 s, 160 s ... by default."""
    return settings.job_retry_backoff_s * 4**retry


class RQDispatcher:
    """Enqueues job ids on RQ queues over one Redis connection pool (not a connection per job)."""

    def __init__(self, settings: Settings) -> None:
        from redis import Redis
        from rq import Queue

        self._settings = settings
        self._conn = Redis.from_url(settings.redis_url or "")
        self._queues = {name: Queue(name, connection=self._conn) for name in QUEUES}

    def queue(self, name: str) -> Any:
        return self._queues[name]

    def enqueue(self, tenant_id: uuid.UUID, job_id: uuid.UUID, kind: str, *, recovery: bool = False) -> None:
        """Put the job on its queue. The first enqueue uses the job's own id as the RQ job id, so a
        cancel can find it there; a recovery re-enqueue gets a fresh one, since the first RQ job
        may still exist (started by a worker that died) and must not be overwritten."""
        from rq import Retry

        s = self._settings
        retries = s.job_max_attempts - 1
        self._queues[queue_for(kind)].enqueue(
            RUN_JOB,
            str(tenant_id),
            str(job_id),
            job_id=None if recovery else str(job_id),
            retry=Retry(max=retries, interval=[int(backoff_s(s, i)) for i in range(retries)]) if retries else None,
            job_timeout=s.job_timeout_s,
            failure_ttl=FAILED_TTL_S,
            description=f"memvault {kind} {job_id}",
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

    async def dispatch(self, tenant_id: uuid.UUID, job_id: uuid.UUID, kind: str) -> None:
        await asyncio.to_thread(self.enqueue, tenant_id, job_id, kind)

    async def cancel(self, job_id: uuid.UUID) -> None:
        await asyncio.to_thread(self.remove, job_id)

    async def aclose(self) -> None:
        await asyncio.to_thread(self._conn.close)


class ThreadDispatcher:
    """Runs jobs on a few threads of the server process, each in its own event loop, retrying
    with the same backoff as RQ. On shutdown, running jobs finish; jobs not started stay
    `queued` in PostgreSQL and are recovered at the next start."""

    def __init__(self, ctx: JobContext) -> None:
        self._ctx = ctx
        self._pool = ThreadPoolExecutor(ctx.settings.job_threads, thread_name_prefix="memvault-job")
        self._stopping = threading.Event()

    async def dispatch(self, tenant_id: uuid.UUID, job_id: uuid.UUID, kind: str) -> None:
        if not self._stopping.is_set():
            self._pool.submit(self._run, tenant_id, job_id)

    async def cancel(self, job_id: uuid.UUID) -> None:
        return None  # when its thread reaches it, the claim finds it cancelled and skips it

    def _run(self, tenant_id: uuid.UUID, job_id: uuid.UUID) -> None:
        retry = 0
        while not self._stopping.is_set():
            try:
                outcome = execute(self._ctx, tenant_id, job_id)
            except Exception:  # the database unreachable, say: the row could not even record it
                log.exception("job %s could not run", job_id)
                return
            if not outcome.retry or self._stopping.wait(backoff_s(self._ctx.settings, retry)):
                return
            retry += 1

    async def recover(self) -> int:
        """Dispatch the jobs a stopped server left queued or running."""
        left = await unfinished_jobs(self._ctx.urls, queued_for=timedelta(0))
        for tenant_id, job_id, kind in left:
            await self.dispatch(tenant_id, job_id, kind)
        return len(left)

    async def aclose(self) -> None:
        self._stopping.set()
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
    return threads
