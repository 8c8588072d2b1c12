from __future__ import annotations

import uuid

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.principal import SYSTEM_TENANT_ID
from memvault.tenants.models import Tenant


async def insert(s: AsyncSession, name: str, plan: str = "unlimited") -> Tenant:
    tenant = Tenant(name=name, plan=plan)
    s.add(tenant)
    await s.flush()
    return tenant


async def by_name(s: AsyncSession, name: str) -> Tenant | None:
    return await s.scalar(select(Tenant).where(Tenant.name == name))


# Transaction-level advisory key of the first start ("bootstrp"): replicas starting at once on an
# empty database queue on it, so one makes the first tenant and the others then find it.
FIRST_START_LOCK = int.from_bytes(b"bootstrp", "big") - (1 << 63)


async def hold_first_start(s: AsyncSession) -> None:
    await s.execute(select(func.pg_advisory_xact_lock(FIRST_START_LOCK)))


async def count_in_use(s: AsyncSession) -> int:
    """Tenants that people use: the reserved system tenant (system-scope memories) is not one."""
    return int(await s.scalar(select(func.count()).select_from(Tenant).where(Tenant.id != SYSTEM_TENANT_ID)) or 0)


async def get(s: AsyncSession, tenant_id: uuid.UUID) -> Tenant | None:
    return await s.get(Tenant, tenant_id)
