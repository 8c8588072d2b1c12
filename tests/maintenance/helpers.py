"""Shared by the maintenance tests: store memories, run a maintenance job to its end through the
facade (as a worker would), set columns the API does not expose with owner SQL."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import text

from memvault.api import NamespaceAPI
from memvault.maintenance.schemas import OrganizeIn, Step
from memvault.memories.schemas import MemoryIn, MemoryOut
from tests.conftest import Tenant


async def store(api: NamespaceAPI, t: Tenant, *bodies: dict[str, Any]) -> list[MemoryOut]:
    return await api.store_many(t.principal, t.namespace, [MemoryIn(**b) for b in bodies])


async def organize(api: NamespaceAPI, t: Tenant, *steps: str, budget_ms: int = 600_000) -> dict[str, Any]:
    """Queue an organize job and run it here, as `memvault worker` would; returns its result."""
    out = await api.organize(t.principal, t.namespace, OrganizeIn(jobs=[Step(s) for s in steps], budget_ms=budget_ms))
    outcome = await api.run_job(t.principal, out.job_id)
    assert outcome.status == "succeeded", outcome
    job = await api.get_job(t.principal, out.job_id)
    assert job.status == "succeeded" and job.kind == "organize" and job.progress == 1.0
    assert job.result is not None
    return job.result


async def owner_sql(api: NamespaceAPI, sql: str, **params: Any) -> None:
    async with api._db.owner() as s:
        await s.execute(text(sql), params)


async def set_fields(api: NamespaceAPI, memory_id: uuid.UUID, assignments: str, **params: Any) -> None:
    await owner_sql(api, f"UPDATE memories SET {assignments} WHERE id = :id", id=memory_id, **params)
