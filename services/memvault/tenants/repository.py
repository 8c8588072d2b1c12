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


async def count_in_use(s: AsyncSession) -> int:
    """Tenants that people use: the reserved system tenant (system-scope memories) is not one."""
    return int(await s.scalar(select(func.count()).select_from(Tenant).where(Tenant.id != SYSTEM_TENANT_ID)) or 0)


async def get(s: AsyncSession, tenant_id: uuid.UUID) -> Tenant | None:
    return await s.get(Tenant, tenant_id)
