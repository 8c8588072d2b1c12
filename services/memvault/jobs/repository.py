from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, case, func, select, text, tuple_, union_all, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from memvault.db.base import app_now, first_time
from memvault.jobs.models import Job
from memvault.jobs.registry import JobKind
from memvault.namespaces.models import Namespace


async def create(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    *,
    namespace_id: uuid.UUID | None,
    kind: JobKind,
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


async def claim(s: AsyncSession, tenant_id: uuid.UUID, job_id: uuid.UUID) -> Job | None:
    """Mark the job running and count the attempt, if it is still to do.

    The caller holds the job's advisory lock, so a job found `running` was left so by a runner
    that died: it is taken over. Finished, failed and cancelled jobs are not run again."""
    stmt = (
        update(Job)
        .where(Job.tenant_id == tenant_id, Job.id == job_id, Job.status.in_(["queued", "running"]))
        .values(
            status="running",
            attempts=Job.attempts + 1,
            started_at=first_time(Job.started_at),
            updated_at=func.now(),
        )
        .returning(Job)
    )
    return await s.scalar(stmt, execution_options={"synchronize_session": False, "populate_existing": True})


async def finish(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    job_id: uuid.UUID,
    *,
    status: str,
    result: dict[str, Any] | None = None,
    error: str | None = None,
) -> None:
    done = status in ("succeeded", "failed", "cancelled")
    values: dict[str, Any] = {"status": status, "error": error, "updated_at": func.now()}
    if result is not None:
        values["result"] = result
    if done:
        values["finished_at"] = func.now()
    if status == "succeeded":
        values["progress"] = 1.0
    await s.execute(
        update(Job).where(Job.tenant_id == tenant_id, Job.id == job_id).values(**values),
        execution_options={"synchronize_session": False},
    )


async def set_progress(s: AsyncSession, tenant_id: uuid.UUID, job_id: uuid.UUID, progress: float) -> bool:
    """Record progress; returns whether the job was asked to stop (so a handler reporting progress
    learns of a cancel without a query of its own)."""
    requested = await s.scalar(
        update(Job)
        .where(Job.tenant_id == tenant_id, Job.id == job_id, Job.status == "running")
        .values(progress=max(0.0, min(1.0, progress)), updated_at=func.now())
        .returning(Job.cancel_requested_at),
        execution_options={"synchronize_session": False},
    )
    return requested is not None


async def cancel_requested(s: AsyncSession, tenant_id: uuid.UUID, job_id: uuid.UUID) -> bool:
    at = await s.scalar(select(Job.cancel_requested_at).where(Job.tenant_id == tenant_id, Job.id == job_id))
    return at is not None


async def cancel(s: AsyncSession, tenant_id: uuid.UUID, job_id: uuid.UUID) -> Job:
    """Cancel a queued job at once (its runner will find it cancelled and skip it), or ask a running
    one to stop. The caller holds the row lock and has checked that the job is not finished."""
    job = await s.scalar(
        update(Job)
        .where(Job.tenant_id == tenant_id, Job.id == job_id)
        .values(
            status=case((Job.status == "queued", "cancelled"), else_=Job.status),
            finished_at=case((Job.status == "queued", app_now()), else_=Job.finished_at),
            cancel_requested_at=first_time(Job.cancel_requested_at),
            updated_at=func.now(),
        )
        .returning(Job),
        execution_options={"synchronize_session": False, "populate_existing": True},
    )
    assert job is not None  # locked by the caller
    return job


# That no session holds the job's run lock (``run_lock``): read from pg_locks rather than by
# trying the lock, which would make a runner trying it at that instant skip the job. A bigint
# advisory key shows as its high half in classid, its low half in objid, with objsubid 1.
_RUN_LOCK_FREE = text(
    "NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.objsubid = 1"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended('memvault:job:' || jobs.id::text, 0))"
)


async def orphans(s: AsyncSession, *, quiet_before: datetime) -> list[tuple[uuid.UUID, uuid.UUID, str]]:
    """(tenant, job, kind) of every job that no runner holds and that is either `running` (its
    runner died: the lock went with its connection) or `queued` with no change since
    ``quiet_before`` (its enqueue failed, or its queue lost it), across tenants, oldest first:
    for the sweep that dispatches them again, so an owner session only. The caller still checks
    the queues: a job waiting its turn there is not an orphan."""
    rows = await s.execute(
        select(Job.tenant_id, Job.id, Job.kind)
        .where(
            (Job.status == "running") | ((Job.status == "queued") & (Job.updated_at < quiet_before)),
            _RUN_LOCK_FREE,
        )
        .order_by(Job.created_at)
    )
    return [(t, j, k) for t, j, k in rows.all()]


@asynccontextmanager
async def run_lock(engine: AsyncEngine, job_id: uuid.UUID) -> AsyncIterator[bool]:
    """Hold the job's session-level advisory lock on a connection of its own while it runs.

    Yields whether it was free. A runner that dies loses its connection and so the lock, which
    is how the next runner knows a `running` row is abandoned rather than in progress."""
    async with engine.connect() as raw:
        conn = await raw.execution_options(isolation_level="AUTOCOMMIT")
        key = {"k": f"memvault:job:{job_id}"}
        got = bool(await conn.scalar(text("SELECT pg_try_advisory_lock(hashtextextended(:k, 0))"), key))
        try:
            yield got
        finally:
            if got:
                await conn.execute(text("SELECT pg_advisory_unlock(hashtextextended(:k, 0))"), key)


async def get_with_namespace(
    s: AsyncSession, tenant_id: uuid.UUID, job_id: uuid.UUID, *, for_update: bool = False
) -> tuple[Job, str | None] | None:
    stmt = (
        select(Job, Namespace.name)
        .outerjoin(Namespace, (Namespace.tenant_id == Job.tenant_id) & (Namespace.id == Job.namespace_id))
        .where(Job.tenant_id == tenant_id, Job.id == job_id)
        .execution_options(populate_existing=True)
    )
    if for_update:
        # The job row only: the namespace is on the nullable side of the join.
        stmt = stmt.with_for_update(of=Job)
    row = (await s.execute(stmt)).first()
    return None if row is None else (row[0], row[1])


async def queued_by_kind(s: AsyncSession) -> dict[str, int]:
    """How many jobs wait to run, by kind, over every tenant (the owner's session: for /metrics)."""
    rows = await s.execute(select(Job.kind, func.count()).where(Job.status == "queued").group_by(Job.kind))
    return {kind: int(n) for kind, n in rows.all()}


async def page(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    *,
    statuses: tuple[str, ...],
    namespace_ids: list[uuid.UUID] | None,
    limit: int,
    before: tuple[datetime, uuid.UUID] | None,
) -> list[tuple[Job, str | None]]:
    """The tenant's jobs in ``statuses`` newest first by (created_at, id), ``limit`` of them after
    ``before``, each with its namespace's name. ``namespace_ids``: only those namespaces' jobs
    (None: every job of the tenant, those of no namespace too).

    One branch per status, each reading ix_jobs_status (tenant_id, status, created_at) in order
    and stopping at ``limit``, merged: a tenant's whole job history is never sorted for a page."""
    reach: list[ColumnElement[bool]] = [] if namespace_ids is None else [Job.namespace_id.in_(namespace_ids)]
    if before is not None:
        reach.append(tuple_(Job.created_at, Job.id) < tuple_(*before))
    branches = [
        select(Job.id, Job.created_at)
        .where(Job.tenant_id == tenant_id, Job.status == status, *reach)
        .order_by(Job.created_at.desc(), Job.id.desc())
        .limit(limit)
        for status in statuses
    ]
    top = (union_all(*branches) if len(branches) > 1 else branches[0]).subquery()
    stmt = (
        select(Job, Namespace.name)
        .join(top, (Job.tenant_id == tenant_id) & (Job.id == top.c.id))
        .outerjoin(Namespace, (Namespace.tenant_id == Job.tenant_id) & (Namespace.id == Job.namespace_id))
        .order_by(top.c.created_at.desc(), top.c.id.desc())
        .limit(limit)
        .execution_options(populate_existing=True)
    )
    return [(job, name) for job, name in (await s.execute(stmt)).all()]


async def namespace_ids(s: AsyncSession, tenant_id: uuid.UUID, names: frozenset[str] | None) -> dict[str, uuid.UUID]:
    """Name -> id of the tenant's namespaces (only ``names`` when given): what a listing may reach."""
    stmt = select(Namespace.name, Namespace.id).where(Namespace.tenant_id == tenant_id)
    if names is not None:
        stmt = stmt.where(Namespace.name.in_(sorted(names)))
    return {name: ns_id for name, ns_id in (await s.execute(stmt)).all()}
