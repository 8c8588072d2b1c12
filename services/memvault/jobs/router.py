from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Response
from pydantic import AfterValidator

from memvault.gateway.deps import Api, ReadPrincipal, WritePrincipal
from memvault.gateway.idempotency import IDEMPOTENT
from memvault.jobs.schemas import JobOut, JobPage, JobStatus
from memvault.jobs.service import MAX_PAGE
from memvault.memories.schemas import no_nul

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.get("")
async def list_jobs(
    p: ReadPrincipal,
    api: Api,
    state: JobStatus | None = None,
    namespace: Annotated[str | None, Query(max_length=64), AfterValidator(no_nul)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    cursor: Annotated[str | None, Query(max_length=200), AfterValidator(no_nul)] = None,
) -> JobPage:
    """The tenant's background jobs, newest first: queued and running ones with their progress,
    and finished ones with what they did or why they failed. Filter by `state` and `namespace`; a
    namespace-limited key sees its namespaces' jobs only."""
    return await api.list_jobs(p, state=state, namespace=namespace, limit=limit, cursor=cursor)


@router.get("/{job_id}")
async def get_job(job_id: uuid.UUID, p: ReadPrincipal, api: Api) -> JobOut:
    """A background job (extraction after `POST .../events`, or `POST .../organize`): its status,
    progress, what it did once finished, and the error of its last failed attempt."""
    return await api.get_job(p, job_id)


@router.post(
    "/{job_id}/cancel",
    responses={202: {"model": JobOut, "description": "Running: asked to stop."}},
    dependencies=[IDEMPOTENT],
)
async def cancel_job(job_id: uuid.UUID, p: WritePrincipal, api: Api, response: Response) -> JobOut:
    """Cancel a job. A queued job is `cancelled` at once and never runs (200). A running job is asked
    to stop (202, `cancel_requested_at` set): it ends `cancelled` at its next batch, keeping what
    it did, which its `result` reports. Cancelling a cancelled job again is harmless; a succeeded
    or failed one is `409 job_finished`."""
    out = await api.cancel_job(p, job_id)
    if out.status == JobStatus.running:
        response.status_code = 202
    return out
