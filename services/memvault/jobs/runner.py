"""Running one job outside a request, in a worker process or a server thread.

RQ calls ``run_job(tenant_id, job_id)``: plain strings in, so the queue carries nothing but ids.
Each run owns its event loop (``asyncio.run``) and an unpooled engine, because an asyncio
connection belongs to the loop that opened it, and builds ``Principal.system(tenant_id)``: a job
acts inside its own tenant and no other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import uuid
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from memvault.config import Settings
from memvault.db.session import Database
from memvault.db.urls import DatabaseUrls
from memvault.embeddings import Embedder
from memvault.errors import DatabaseUnavailable
from memvault.jobs.service import JobOutcome
from memvault.observability import logs, metrics
from memvault.principal import Principal

log = logging.getLogger(__name__)

# The RQ job's meta key for the id of the request that enqueued it (dispatch.RQDispatcher sets it).
REQUEST_ID_META = "request_id"


class JobFailed(Exception):
    """Raised to RQ so that it retries the job with backoff; the error is already on the row."""


class LoopBoundEmbedder:
    """An embedder used from other event loops, always run on the loop that owns it.

    Embedders hold loop-bound state (an asyncio lock around the model, an HTTP client), and jobs
    each run on a fresh loop; this hands every call to the owning loop and waits for it."""

    def __init__(self, inner: Embedder, loop: asyncio.AbstractEventLoop) -> None:
        self._inner = inner
        self._loop = loop
        self.dim = inner.dim

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    async def embed(self, texts: Sequence[str], *, tenant: Hashable | None = None) -> list[list[float]]:
        call = self._inner.embed(list(texts), tenant=tenant)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call, self._loop))

    async def embed_query(self, text: str) -> list[float]:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._inner.embed_query(text), self._loop))

    async def aclose(self) -> None:
        return None  # the owner closes the inner embedder


@dataclass(frozen=True)
class JobContext:
    """What every run needs and is built once per process: settings, where the database is, and
    an embedder that is safe to call from any loop."""

    settings: Settings
    urls: DatabaseUrls
    embedder: Embedder


def execute(ctx: JobContext, tenant_id: uuid.UUID, job_id: uuid.UUID) -> JobOutcome:
    """Run one job in a fresh event loop with its own unpooled engine (blocking)."""
    return asyncio.run(_execute(ctx, tenant_id, job_id))


async def _execute(ctx: JobContext, tenant_id: uuid.UUID, job_id: uuid.UUID) -> JobOutcome:
    from memvault.api import NamespaceAPI

    db = Database(ctx.urls, pooled=False)
    try:
        api = NamespaceAPI(db, ctx.embedder, ctx.settings)
        try:
            outcome = await api.run_job(Principal.system(tenant_id, subject=f"job:{job_id}"), job_id)
        finally:
            await api.aclose()  # the job's usage and access counts, before the engine goes
    finally:
        await db.dispose()
    log.info("job %s: %s %s", job_id, outcome.status, outcome.error or "")
    return outcome


async def orphaned_jobs(urls: DatabaseUrls, *, quiet_for: timedelta) -> list[tuple[uuid.UUID, uuid.UUID, str]]:
    """Jobs no runner holds: left `running` by a runner that died, or `queued` and unchanged for
    ``quiet_for`` (see ``repository.orphans``).

    Reads every tenant's jobs, so it is an operator path (memvault/operator.py); it returns ids only, and each job
    then runs as its own tenant."""
    from memvault import operator

    db = Database(urls, pooled=False)
    try:
        return await operator.orphaned_jobs(db, quiet_before=datetime.now(UTC) - quiet_for)
    finally:
        await db.dispose()


# ---- the RQ worker process ----------------------------------------------------------------

_context: JobContext | None = None
_context_lock = threading.Lock()


def _home_loop() -> asyncio.AbstractEventLoop:
    """A loop on a daemon thread that owns the worker's embedder for the process's lifetime."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="memvault-embedder", daemon=True).start()
    return loop


def worker_context(settings: Settings | None = None) -> JobContext:
    """The process's job context, built on first use: the embedding model loads once per worker."""
    global _context
    with _context_lock:
        if _context is None:
            from memvault.embeddings import build_embedder
            from memvault.runtime import database_urls

            settings = settings or Settings()
            emb = build_embedder(settings)
            load = getattr(emb, "load", None)
            if load is not None:
                load()
            _context = JobContext(settings, database_urls(settings), LoopBoundEmbedder(emb, _home_loop()))
        return _context


def run_job(tenant_id: str, job_id: str) -> dict[str, Any]:
    """The RQ job function: run one memvault job by id, its log lines carrying the id of the
    request that enqueued it (the RQ job's meta), as in-process jobs' do."""
    from rq import get_current_job

    rq_job = get_current_job()
    rid = rq_job.meta.get(REQUEST_ID_META) if rq_job is not None else None
    with logs.request_context(rid if isinstance(rid, str) else None):
        outcome = execute(worker_context(), uuid.UUID(tenant_id), uuid.UUID(job_id))
    if outcome.retry:
        raise JobFailed(outcome.error)
    return {"status": outcome.status, **outcome.result}


def _sweep(dispatcher: Any, urls: DatabaseUrls, quiet_for: timedelta) -> None:
    try:
        asyncio.run(dispatcher.sweep(urls, quiet_for=quiet_for))
    except DatabaseUnavailable:
        log.warning("job sweep skipped: the database is not reachable")
    except Exception:  # Redis away, say: the next sweep tries again
        log.warning("job sweep failed; the next one tries again", exc_info=True)


def _sweep_every(dispatcher: Any, urls: DatabaseUrls, interval_s: float, stopping: threading.Event) -> None:
    """The worker's sweep thread: every ``interval_s``, if no other worker has swept meanwhile,
    enqueue again the jobs PostgreSQL has as queued or abandoned and no queue holds."""
    while not stopping.wait(interval_s):
        try:
            turn = dispatcher.take_sweep_turn(interval_s)
        except Exception:
            log.warning("job sweep skipped: Redis does not answer", exc_info=True)
            continue
        if turn:
            _sweep(dispatcher, urls, timedelta(seconds=interval_s))


def _send_webhooks(settings: Settings, urls: DatabaseUrls, stopping: threading.Event) -> None:
    """The webhook sender beside the RQ worker: a long-lived loop of its own on this thread (its
    pooled engine belongs to this loop), so a delivery waits for no job and no enqueue, and a
    Redis restart does not touch it (the outbox is in PostgreSQL). When the worker stops, the
    sender is stopped as `memvault serve` stops its own: attempts in flight end and are recorded."""
    from memvault.webhooks.delivery.runner import DeliveryRunner

    async def run() -> None:
        db = Database(urls, pool_size=4)
        sending = asyncio.create_task(DeliveryRunner(db, settings).run())
        try:
            while not (stopping.is_set() or sending.done()):  # noqa: ASYNC110 - a thread's event
                await asyncio.sleep(0.2)
            sending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sending
        finally:
            await db.dispose()

    asyncio.run(run())


@contextlib.contextmanager
def webhooks_sent_beside(settings: Settings, urls: DatabaseUrls, stopping: threading.Event) -> Iterator[None]:
    """The webhook sender on a thread of its own for as long as the block runs (when webhooks are
    swept at all). However the block ends, a stop request or an error of the worker's loop, the
    sender is stopped and waited for: its attempts in flight end and are recorded, where a daemon
    thread cut off at exit would leave them to be sent again after their lease."""
    if settings.webhook_sweep_interval_s <= 0:
        yield
        return
    from memvault.webhooks.delivery.runner import stop_wait_s

    # A daemon still: if the sender does not end within its bound, the process exits anyway.
    sender = threading.Thread(
        target=_send_webhooks, args=(settings, urls, stopping), name="memvault-webhooks", daemon=True
    )
    sender.start()
    try:
        yield
    finally:
        stopping.set()
        sender.join(timeout=stop_wait_s(settings) + 5)


def serve_worker(
    settings: Settings, queues: Sequence[str], *, metrics_port: int | None = None, metrics_host: str = "127.0.0.1"
) -> None:
    """`memvault worker`: load the model, enqueue again what stopped workers or a failed enqueue
    left, then take jobs until SIGTERM or SIGINT, sweeping for such jobs every
    ``job_sweep_interval_s``. Its job metrics go to PROMETHEUS_MULTIPROC_DIR when that is set (a
    server's scrape on the same host sums them in), and are served on ``metrics_port`` if given.

    A SimpleWorker runs jobs in this process rather than a fork per job: the embedding model is
    loaded once, and torch is not carried across a fork. A SIGKILL mid-job leaves its row
    `running`; the sweep finds it, and its advisory lock (gone with the dead connection) shows
    nobody runs it. When Redis goes away RQ's loop ends; this one starts it again, backing off
    from 1 s to 30 s, instead of exiting."""
    import signal
    import time

    from redis import Redis
    from redis.exceptions import RedisError
    from rq import Queue, SimpleWorker

    from memvault.jobs.dispatch import RQDispatcher

    if metrics_port is not None:
        metrics.serve_own(metrics_port, metrics_host)
        log.info("job metrics on http://%s:%d/metrics", metrics_host, metrics_port)
    ctx = worker_context(settings)
    dispatcher = RQDispatcher(settings)
    stopping = threading.Event()

    class Worker(SimpleWorker):
        def request_stop(self, signum: int, frame: Any) -> None:
            stopping.set()  # a warm shutdown asked for: the loop below must not start RQ again
            super().request_stop(signum, frame)

    if settings.job_recover_on_start:
        _sweep(dispatcher, ctx.urls, timedelta(0))
    if settings.job_sweep_interval_s > 0:
        threading.Thread(
            target=_sweep_every,
            args=(dispatcher, ctx.urls, settings.job_sweep_interval_s, stopping),
            name="memvault-job-sweep",
            daemon=True,
        ).start()
    conn = Redis.from_url(settings.redis_url or "")
    backoff = 1.0
    try:
        with webhooks_sent_beside(settings, ctx.urls, stopping):
            while not stopping.is_set():
                began = time.monotonic()
                try:
                    # Inside the try: RQ names its connection to Redis when the worker is built, which
                    # fails the same way while Redis is still down.
                    worker = Worker([Queue(name, connection=conn) for name in queues], connection=conn)
                    worker.work(with_scheduler=True)
                except RedisError as exc:
                    log.warning("worker lost Redis: %s", exc)
                if stopping.is_set():
                    break
                # RQ's signal handlers outlive its loop and would raise in the wait: ours only stop.
                for sig in (signal.SIGTERM, signal.SIGINT):
                    signal.signal(sig, lambda *_: stopping.set())
                if time.monotonic() - began > 60:
                    backoff = 1.0
                log.warning("the RQ worker loop ended without a stop request; starting it again in %.0f s", backoff)
                stopping.wait(backoff)
                backoff = min(backoff * 2, 30.0)
    finally:
        metrics.process_exited()
