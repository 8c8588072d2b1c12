from __future__ import annotations

import uuid

from fastapi import APIRouter, Response

from memvault.gateway.deps import Api, ReadPrincipal, WritePrincipal
from memvault.gateway.idempotency import IDEMPOTENT
from memvault.jobs.schemas import JobOut, JobStatus

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


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
