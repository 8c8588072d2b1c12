from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.memories.models import Memory
from memvault.namespaces.models import Namespace
from memvault.plans.limits import PlanLimits
from memvault.plans.models import Plan
from memvault.tenants.models import Tenant


@dataclass(frozen=True)
class TenantPlan:
    """A tenant's plan as it applies: the plan's limits with the tenant's overrides laid over."""

    name: str
    limits: PlanLimits
    overrides: dict[str, Any]


async def of_tenant(s: AsyncSession, tenant_id: uuid.UUID) -> TenantPlan | None:
    """Reads in the tenant's own RLS-bound transaction: it sees its own row and every plan."""
    row = (
        await s.execute(
            select(Tenant.plan, Tenant.plan_overrides, Plan.limits)
            .join(Plan, Plan.name == Tenant.plan)
            .where(Tenant.id == tenant_id)
        )
    ).one_or_none()
    if row is None:
        return None
    plan, overrides, limits = row
    return TenantPlan(plan, PlanLimits.parse(limits).with_overrides(overrides or {}), dict(overrides or {}))


async def all_plans(s: AsyncSession) -> list[Plan]:
    return list(await s.scalars(select(Plan).order_by(Plan.name)))


async def by_name(s: AsyncSession, name: str) -> Plan | None:
    return await s.get(Plan, name)


async def upsert(s: AsyncSession, name: str, limits: PlanLimits, description: str = "") -> None:
    values = {"name": name, "limits": limits.as_dict(), "description": description}
    stmt = insert(Plan).values(**values)
    await s.execute(
        stmt.on_conflict_do_update(
            index_elements=[Plan.name], set_={"limits": stmt.excluded.limits, "description": stmt.excluded.description}
        )
    )


async def set_tenant_plan(
    s: AsyncSession, tenant_id: uuid.UUID, plan: str, overrides: dict[str, Any] | None = None
) -> None:
    values: dict[str, Any] = {"plan": plan}
    if overrides is not None:
        values["plan_overrides"] = overrides
    await s.execute(update(Tenant).where(Tenant.id == tenant_id).values(**values))


async def hold_quota(s: AsyncSession, tenant_id: uuid.UUID, quota: str) -> None:
    """Hold the tenant's `quota` until this transaction ends, so two writes that each find room
    under the cap cannot both take it (a transaction-level advisory lock: released by the commit
    or rollback, never left behind). Taken only by tenants whose plan caps the quota."""
    await s.execute(select(func.pg_advisory_xact_lock(func.hashtextextended(f"quota:{quota}:{tenant_id}", 0))))


async def count_memories(s: AsyncSession, tenant_id: uuid.UUID) -> int:
    """Every stored memory row of the tenant, history included (what `memory_count` shows)."""
    return int(await s.scalar(select(func.count()).select_from(Memory).where(Memory.tenant_id == tenant_id)) or 0)


async def count_namespaces(s: AsyncSession, tenant_id: uuid.UUID) -> int:
    return int(await s.scalar(select(func.count()).select_from(Namespace).where(Namespace.tenant_id == tenant_id)) or 0)
