"""The job part of the facade: read a job, and run one to its end for a runner.

A job's row is the truth. Running one takes its advisory lock (so two runners never run it at
once, and a dead runner's lock vanishes with its connection), claims the row, calls the handler
its kind has in the job registry (jobs/registry.py) and records the outcome.
Handlers are written to be re-run: what they already did is found in PostgreSQL and skipped.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from memvault.db.pagination import decode_cursor, encode_cursor
from memvault.db.session import Database
from memvault.errors import Conflict, MemvaultError, NotFound
from memvault.facade import FacadeBase, NamespaceNotFound
from memvault.jobs import repository as repo
from memvault.jobs.models import Job
from memvault.jobs.registry import JobKind, job_handlers
from memvault.jobs.schemas import JobOut, JobPage, JobStatus
from memvault.observability.metrics import observe_job
from memvault.operations import Operation, operation
from memvault.principal import Principal
from memvault.webhooks import outbox

log = logging.getLogger(__name__)

Progress = Callable[[float], Awaitable[None]]
# Kinds whose work embeds text: not started for a tenant past its monthly embedded-token cap.
EMBEDDING_KINDS = frozenset({JobKind.extraction, JobKind.organize, JobKind.reembed})
# The longest page a listing returns.
MAX_PAGE = 200
FINISHED = (JobStatus.succeeded, JobStatus.failed, JobStatus.cancelled)


class JobNotFound(NotFound):
    code = "job_not_found"
    title = "Job not found"


class JobFinished(Conflict):
    code = "job_finished"
    title = "Job already finished"


class JobRun:
    """What a handler gets besides its job: ``await run(fraction)`` reports progress, and
    ``run.cancelled`` says whether the job was asked to stop.

    Cancelling is cooperative: a handler checks ``cancelled`` between batches and returns what it
    did so far. The flag is read from the job's row by a watcher every ``poll_s`` seconds, and by
    every progress report, so a handler never queries for it itself."""

    def __init__(self, db: Database, tenant_id: uuid.UUID, job_id: uuid.UUID, poll_s: float) -> None:
        self._db = db
        self._tenant_id = tenant_id
        self._job_id = job_id
        self._poll_s = poll_s
        self._cancelled = False
        # Webhook events the handler's work causes, queued with the job's success (outbox.emit_many).
        self.on_success: list[outbox.Event] = []

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    async def __call__(self, fraction: float) -> None:
        async with self._db.tenant_tx(self._tenant_id) as tx:
            if await repo.set_progress(tx.session, self._tenant_id, self._job_id, fraction):
                self._cancelled = True

    @asynccontextmanager
    async def watching(self) -> AsyncIterator[None]:
        """Poll the row for a cancel while the body runs; stopped between polls, never mid-query."""
        stop = asyncio.Event()

        async def watch() -> None:
            while not self._cancelled:
                with suppress(TimeoutError):
                    async with asyncio.timeout(self._poll_s):
                        await stop.wait()
                        return
                try:
                    async with self._db.tenant_tx(self._tenant_id) as tx:
                        if await repo.cancel_requested(tx.session, self._tenant_id, self._job_id):
                            self._cancelled = True
                except Exception:  # a missed poll only delays the stop; the next one retries
                    log.warning("job %s: cancel check failed", self._job_id, exc_info=True)

        task = asyncio.create_task(watch())
        try:
            yield
        finally:
            stop.set()
            await task


Handler = Callable[[Principal, Job, JobRun], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class JobOutcome:
    """What one run did: `succeeded`, `failed`, `cancelled` (stopped early, or cancelled while
    its runner was gone), `queued` (failed, to be retried) or `skipped` (already finished or
    cancelled, or running elsewhere)."""

    status: str
    result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def retry(self) -> bool:
        return self.status == JobStatus.queued


def job_out(job: Job, namespace: str | None) -> JobOut:
    return JobOut(
        id=job.id,
        kind=job.kind,
        namespace=namespace,
        status=JobStatus(job.status),
        progress=None if job.progress is None else round(job.progress, 4),
        result=job.result,
        error=job.error,
        attempts=job.attempts,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        cancel_requested_at=job.cancel_requested_at,
        updated_at=job.updated_at,
    )


def _describe(exc: Exception) -> str:
    if isinstance(exc, MemvaultError):
        return f"{exc.code}: {exc.detail}"
    return f"{type(exc).__name__}: {exc}"[:2000]


class JobOps(FacadeBase):
    @operation("read")
    async def get_job(self, p: Principal, job_id: uuid.UUID) -> JobOut:
        """A background job of the caller's tenant: status, progress, result summary, error, times."""
        p.require("read")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            found = await repo.get_with_namespace(tx.session, p.tenant_id, job_id)
        if found is None:
            raise JobNotFound(f"No job {job_id}.")
        job, namespace = found
        # A namespace-limited key sees only its namespaces' jobs, and is told no more than that.
        if not (p.can_access(namespace) if namespace is not None else p.unrestricted):
            raise JobNotFound(f"No job {job_id}.")
        return job_out(job, namespace)

    @operation("read")
    async def list_jobs(
        self,
        p: Principal,
        *,
        state: JobStatus | None = None,
        namespace: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> JobPage:
        """The tenant's jobs, newest first: what runs now and what ran, in ``state`` and
        ``namespace`` when given. The jobs ``get_job`` would show, no others: a namespace-limited
        principal sees its namespaces' jobs only. Jobs belong to no user (they work on a
        namespace), so a member sees the same list as an owner with the same namespaces."""
        p.require("read", namespace)
        limit = max(1, min(limit, MAX_PAGE))
        before = decode_cursor(cursor) if cursor else None
        async with self._db.tenant_tx(p.tenant_id) as tx:
            if namespace is not None:
                found = await repo.namespace_ids(tx.session, p.tenant_id, frozenset({namespace}))
                if not found:
                    raise NamespaceNotFound(f"No namespace named '{namespace}'.")
                ids: list[uuid.UUID] | None = list(found.values())
            elif not p.unrestricted:
                ids = list((await repo.namespace_ids(tx.session, p.tenant_id, p.namespaces)).values())
            else:
                ids = None
            rows = await repo.page(
                tx.session,
                p.tenant_id,
                statuses=(state.value,) if state is not None else tuple(st.value for st in JobStatus),
                namespace_ids=ids,
                limit=limit + 1,
                before=before,
            )
        more = len(rows) > limit
        rows = rows[:limit]
        last = rows[-1][0] if more and rows else None
        return JobPage(
            data=[job_out(job, name) for job, name in rows],
            next_cursor=encode_cursor(last.created_at, last.id) if last is not None else None,
        )

    @operation("write")
    async def cancel_job(self, p: Principal, job_id: uuid.UUID) -> JobOut:
        """Cancel a job of the caller's tenant. A queued job is `cancelled` at once and never runs; a
        running one is asked to stop (`cancel_requested_at`) and ends `cancelled` at its next
        batch, its result saying what it did until then. Cancelling a cancelled job changes
        nothing; a succeeded or failed one is `409 job_finished`."""
        p.require("write")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            found = await repo.get_with_namespace(tx.session, p.tenant_id, job_id, for_update=True)
            if found is None:
                raise JobNotFound(f"No job {job_id}.")
            job, namespace = found
            if not (p.can_access(namespace) if namespace is not None else p.unrestricted):
                raise JobNotFound(f"No job {job_id}.")
            if job.status == JobStatus.cancelled:
                return job_out(job, namespace)
            if job.status in FINISHED:
                raise JobFinished(f"Job {job_id} has already {job.status}.", extra={"job_status": job.status})
            was = job.status
            job = await repo.cancel(tx.session, p.tenant_id, job_id)
            await self._audit(
                tx,
                p,
                "job.cancel",
                namespace_id=job.namespace_id,
                target_id=str(job_id),
                detail={"kind": job.kind, "was": was},
            )
            if was == JobStatus.queued:
                # Off the queue too, so no worker spends a turn on it (it would only skip it).
                tx.after_commit(lambda: self._jobs.cancel(job_id))
        return job_out(job, namespace)

    async def run_job(self, p: Principal, job_id: uuid.UUID) -> JobOutcome:
        """Run a job of p's tenant to its end, at most one runner at a time. For the job runner
        (``p`` is ``Principal.system``); safe to call again for a job that already ran."""
        p.require("write")
        async with repo.run_lock(self._db.app_engine, job_id) as free:
            if not free:
                return JobOutcome("skipped", {"reason": "running elsewhere"})
            async with self._db.tenant_tx(p.tenant_id) as tx:
                job = await repo.claim(tx.session, p.tenant_id, job_id)
                if job is None:
                    existing = await repo.get(tx.session, p.tenant_id, job_id)
            if job is None:
                return JobOutcome("skipped", {"reason": existing.status if existing else "no such job"})
            log.info("job %s (%s) attempt %d started", job_id, job.kind, job.attempts)
            if job.cancel_requested_at is not None:
                # Asked to stop while a runner that has since died was running it: stop here.
                async with self._db.tenant_tx(p.tenant_id) as tx:
                    await repo.finish(tx.session, p.tenant_id, job_id, status=JobStatus.cancelled, error=job.error)
                return JobOutcome(JobStatus.cancelled)

            run = JobRun(self._db, p.tenant_id, job_id, self._settings.job_cancel_poll_s)
            started = time.perf_counter()
            # Only a row of a kind this version does not know (a newer version's) has no handler.
            name = job_handlers(type(self)).get(job.kind)
            try:
                if name is None:
                    raise UnknownJobKind(f"No handler for jobs of kind '{job.kind}'.")
                if job.kind in EMBEDDING_KINDS:
                    # Over the month's cap, the job fails at once and its error says why.
                    await self._usage.require_monthly_room(p.tenant_id, "embedded_tokens_per_month")
                handler: Handler = getattr(self, name)
                # What the job uses counts for its tenant, as internal work (metering/tally.py).
                async with self._usage.admit(p, Operation(f"job.{job.kind}", "write")), run.watching():
                    result = await handler(p, job, run)
            except Exception as exc:
                # Refusals (bad input, a namespace gone) fail for good; anything else is retried,
                # unless the job was being cancelled anyway.
                permanent = isinstance(exc, MemvaultError) and exc.status < 500
                retry = not permanent and job.attempts < self._settings.job_max_attempts
                status = JobStatus.cancelled if run.cancelled else JobStatus.queued if retry else JobStatus.failed
                error = _describe(exc)
                log.warning("job %s (%s) attempt %d failed: %s", job_id, job.kind, job.attempts, error, exc_info=True)
                await self._finish(p, job_id, status, error=error)
                observe_job(job.kind, status, started)
                return JobOutcome(status, error=error)
            # A job that noticed the cancel only after its last batch has done all its work: it
            # succeeded. One that stopped early says so in its result.
            status = JobStatus.cancelled if run.cancelled and result.get("cancelled") else JobStatus.succeeded
            await self._finish(p, job_id, status, result=result, announce=run.on_success)
            observe_job(job.kind, status, started)
            return JobOutcome(status, result)

    async def _finish(
        self,
        p: Principal,
        job_id: uuid.UUID,
        status: str,
        *,
        result: dict[str, Any] | None = None,
        error: str | None = None,
        announce: list[outbox.Event] | None = None,
    ) -> None:
        """Record a run's outcome; a job that ended succeeded or failed is a webhook event, queued
        in the same transaction (with what its handler announced, on success)."""
        async with self._db.tenant_tx(p.tenant_id) as tx:
            await repo.finish(tx.session, p.tenant_id, job_id, status=status, result=result, error=error)
            if status not in (JobStatus.succeeded, JobStatus.failed):
                return
            found = await repo.get_with_namespace(tx.session, p.tenant_id, job_id)
            if found is None:
                return
            job, namespace = found
            event = (f"job.{status}", namespace, job_out(job, namespace).model_dump(mode="json"))
            await outbox.emit_many(tx, p.tenant_id, [event, *(announce or [])])


class UnknownJobKind(MemvaultError):
    code = "unknown_job_kind"
    title = "Unknown job kind"
