"""The jobs pages (/dashboard/jobs): what runs in the background for the tenant (extraction after
ingest, organize and its scheduled runs, re-embedding), its progress, and a cancel button. The
facade decides what a member sees (JobOps.list_jobs: the namespaces it reaches) and who may cancel
(write scope); a viewer has no button and a post of theirs is refused there."""

from __future__ import annotations

import uuid
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from starlette.responses import Response

from memvault.dashboard.render import dash
from memvault.dashboard.session import Me, MemberForm, see_other
from memvault.errors import InvalidInput
from memvault.gateway.deps import Api
from memvault.jobs.schemas import JobStatus

router = APIRouter(include_in_schema=False)

PAGE_SIZE = 50
STATES = tuple(s.value for s in JobStatus)
# What the page says after a cancel, by the word the redirect carries (never text from the request).
NOTICES = {
    "cancelled": "Cancelled: the job will not run.",
    "stopping": "Asked to stop: the job ends at its next batch and keeps what it has done.",
}


def _state(value: str | None) -> JobStatus | None:
    if not value:
        return None
    if value not in STATES:
        raise InvalidInput(f"State must be one of {', '.join(STATES)}.", extra={"field": "state"})
    return JobStatus(value)


@router.get("/dashboard/jobs")
async def jobs_page(
    request: Request, api: Api, me: Me, state: str | None = None, cursor: str | None = None
) -> Response:
    chosen = _state(state)
    found = await api.list_jobs(me.principal, state=chosen, limit=PAGE_SIZE, cursor=cursor or None)
    next_url = None
    if found.next_cursor:
        query = {"state": chosen.value} if chosen else {}
        next_url = "/dashboard/jobs?" + urlencode({**query, "cursor": found.next_cursor})
    return dash(
        request,
        me,
        "jobs.html",
        active="jobs",
        title="Jobs",
        jobs=found.data,
        states=STATES,
        state=chosen.value if chosen else "",
        paged=bool(cursor),
        next_url=next_url,
    )


@router.get("/dashboard/jobs/{job_id}")
async def job_page(request: Request, api: Api, me: Me, job_id: uuid.UUID, done: str | None = None) -> Response:
    job = await api.get_job(me.principal, job_id)
    return dash(
        request,
        me,
        "job.html",
        active="jobs",
        title=f"Job {job.kind}",
        notice=NOTICES.get(done or ""),
        job=job,
    )


@router.post("/dashboard/jobs/{job_id}/cancel")
async def cancel_job(api: Api, me: Me, form: MemberForm, job_id: uuid.UUID) -> Response:
    job = await api.cancel_job(me.principal, job_id)
    done = "cancelled" if job.status == JobStatus.cancelled else "stopping"
    return see_other(f"/dashboard/jobs/{job.id}", done=done)
