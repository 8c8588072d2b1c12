"""Running one job outside a request, in a worker process or a server thread.

RQ calls ``run_job(tenant_id, job_id)``: plain strings in, so the queue carries nothing but ids.
Each run owns its event loop (``asyncio.run``) and an unpooled engine, because an asyncio
connection belongs to the loop that opened it, and builds ``Principal.system(tenant_id)``: a job
acts inside its own tenant and no other.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from memvault.config import Settings
from memvault.db.session import Database
from memvault.db.urls import DatabaseUrls
from memvault.embeddings import Embedder
from memvault.jobs.service import JobOutcome
from memvault.principal import Principal

log = logging.getLogger(__name__)


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

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._inner.embed(list(texts)), self._loop))

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
        outcome = await api.run_job(Principal.system(tenant_id, subject=f"job:{job_id}"), job_id)
    finally:
        await db.dispose()
    log.info("job %s: %s %s", job_id, outcome.status, outcome.error or "")
    return outcome


async def unfinished_jobs(urls: DatabaseUrls, *, queued_for: timedelta) -> list[tuple[uuid.UUID, uuid.UUID, str]]:
    """Jobs a stopped runner left behind: running, or queued for longer than ``queued_for``.

    Reads every tenant's jobs, so it uses the owner connection; it returns ids only, and each job
    then runs as its own tenant."""
    from memvault.jobs import repository as repo

    db = Database(urls, pooled=False)
    try:
        async with db.owner() as s:
            return await repo.unfinished(s, queued_before=datetime.now(UTC) - queued_for)
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
    """The RQ job function: run one memvault job by id."""
    outcome = execute(worker_context(), uuid.UUID(tenant_id), uuid.UUID(job_id))
    if outcome.retry:
        raise JobFailed(outcome.error)
    return {"status": outcome.status, **outcome.result}


def serve_worker(settings: Settings, queues: Sequence[str]) -> None:
    """`memvault worker`: load the model, re-enqueue what a stopped worker left, then take jobs.

    A SimpleWorker runs jobs in this process rather than a fork per job: the embedding model is
    loaded once, and torch is not carried across a fork. A SIGKILL mid-job leaves its row
    `running`; the next worker's start finds it, and its advisory lock (gone with the dead
    connection) shows nobody runs it."""
    from redis import Redis
    from rq import SimpleWorker

    from memvault.jobs.dispatch import RQDispatcher

    ctx = worker_context(settings)
    dispatcher = RQDispatcher(settings)
    if settings.job_recover_on_start:
        # Queued jobs younger than this are most likely still on their queue.
        left = asyncio.run(unfinished_jobs(ctx.urls, queued_for=timedelta(minutes=5)))
        for tenant_id, job_id, kind in left:
            dispatcher.enqueue(tenant_id, job_id, kind, recovery=True)
        if left:
            log.info("re-enqueued %d unfinished jobs", len(left))
    conn = Redis.from_url(settings.redis_url or "")
    worker = SimpleWorker([dispatcher.queue(name) for name in queues], connection=conn)
    worker.work(with_scheduler=True)
