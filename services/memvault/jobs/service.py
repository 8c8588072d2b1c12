"""The job part of the facade: read a job, and run one to its end for a runner.

A job's row is the truth. Running one takes its advisory lock (so two runners never run it at
once, and a dead runner's lock vanishes with its connection), claims the row, calls the handler
for its kind (``_job_<kind>`` on the facade, e.g. ``_job_extraction``) and records the outcome.
Handlers are written to be re-run: what they already did is found in PostgreSQL and skipped.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from memvault.errors import MemvaultError, NotFound
from memvault.facade import FacadeBase
from memvault.jobs import repository as repo
from memvault.jobs.models import Job
from memvault.jobs.schemas import JobOut, JobStatus
from memvault.principal import Principal

log = logging.getLogger(__name__)

Progress = Callable[[float], Awaitable[None]]
Handler = Callable[[Principal, Job, Progress], Awaitable[dict[str, Any]]]


class JobNotFound(NotFound):
    code = "job_not_found"
    title = "Job not found"


@dataclass(frozen=True)
class JobOutcome:
    """What one run did: `succeeded`, `failed`, `queued` (failed, to be retried) or `skipped`
    (already finished, or running elsewhere)."""

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
        updated_at=job.updated_at,
    )


def _describe(exc: Exception) -> str:
    if isinstance(exc, MemvaultError):
        return f"{exc.code}: {exc.detail}"
    return f"{type(exc).__name__}: {exc}"[:2000]


class JobOps(FacadeBase):
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

            async def progress(fraction: float) -> None:
                async with self._db.tenant_tx(p.tenant_id) as tx:
                    await repo.set_progress(tx.session, p.tenant_id, job_id, fraction)

            handler: Handler | None = getattr(self, f"_job_{job.kind}", None)
            try:
                if handler is None:
                    raise UnknownJobKind(f"No handler for jobs of kind '{job.kind}'.")
                result = await handler(p, job, progress)
            except Exception as exc:
                # Refusals (bad input, a namespace gone) fail for good; anything else is retried.
                permanent = isinstance(exc, MemvaultError) and exc.status < 500
                retry = not permanent and job.attempts < self._settings.job_max_attempts
                status = JobStatus.queued if retry else JobStatus.failed
                error = _describe(exc)
                log.warning("job %s (%s) attempt %d failed: %s", job_id, job.kind, job.attempts, error, exc_info=True)
                async with self._db.tenant_tx(p.tenant_id) as tx:
                    await repo.finish(tx.session, p.tenant_id, job_id, status=status, error=error)
                return JobOutcome(status, error=error)
            async with self._db.tenant_tx(p.tenant_id) as tx:
                await repo.finish(tx.session, p.tenant_id, job_id, status=JobStatus.succeeded, result=result)
            return JobOutcome(JobStatus.succeeded, result)


class UnknownJobKind(MemvaultError):
    code = "unknown_job_kind"
    title = "Unknown job kind"
