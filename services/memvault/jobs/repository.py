from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.jobs.models import Job


async def create(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    *,
    namespace_id: uuid.UUID | None,
    kind: str,
    payload: dict[str, Any],
    job_key: str | None,
    created_by: str,
) -> tuple[Job, bool]:
    """Insert a queued job, or find the one that already has this (kind, job_key).

    Returns the job and whether this call created it. A concurrent creator of the same key makes
    the INSERT wait for its commit, then find its row, so two callers never get two jobs.
    """
    stmt = (
        insert(Job)
        .values(
            tenant_id=tenant_id,
            namespace_id=namespace_id,
            kind=kind,
            job_key=job_key,
            payload=payload,
            created_by=created_by,
        )
        .on_conflict_do_nothing(index_elements=[Job.tenant_id, Job.kind, Job.job_key])
        .returning(Job)
    )
    # The existing row can vanish between the conflict and the read (its namespace deleted, say);
    # then the insert goes through on the next try.
    for _ in range(3):
        job = await s.scalar(stmt, execution_options={"populate_existing": True})
        if job is not None:
            return job, True
        existing = await s.scalar(
            select(Job)
            .where(Job.tenant_id == tenant_id, Job.kind == kind, Job.job_key == job_key)
            .execution_options(populate_existing=True)
        )
        if existing is not None:
            return existing, False
    raise RuntimeError(f"job {kind}/{job_key} neither inserted nor found")


async def get(s: AsyncSession, tenant_id: uuid.UUID, job_id: uuid.UUID) -> Job | None:
    return await s.scalar(
        select(Job).where(Job.tenant_id == tenant_id, Job.id == job_id).execution_options(populate_existing=True)
    )
