from __future__ import annotations

import uuid

from fastapi import APIRouter

from memvault.gateway.deps import Api, ReadPrincipal
from memvault.jobs.schemas import JobOut

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.get("/{job_id}")
async def get_job(job_id: uuid.UUID, p: ReadPrincipal, api: Api) -> JobOut:
    """A background job (extraction after `POST .../events`, or `POST .../organize`): its status,
    progress, what it did once finished, and the error of its last failed attempt."""
    return await api.get_job(p, job_id)
