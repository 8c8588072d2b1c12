from __future__ import annotations

import uuid
from datetime import datetime
from graphlib import TopologicalSorter

from sqlalchemy import delete, exists, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.keys.models import ApiKey
from memvault.oauth.models import OAuthUser
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


# Every table of the schema with a tenant_id column (partitions and Citus shards aside), and the
# foreign keys between them: read from the catalog when a tenant is deleted, so a table added
# later is emptied with nobody remembering to list it.
_TENANT_TABLES = text(
    """
    SELECT c.relname FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE a.attname = 'tenant_id' AND NOT a.attisdropped AND c.relkind IN ('r', 'p')
      AND NOT c.relispartition AND n.nspname = current_schema()
    """
)
_REFERENCES = text(
    """
    SELECT c.conrelid::regclass::text, c.confrelid::regclass::text FROM pg_constraint c
    JOIN pg_namespace n ON n.oid = c.connamespace
    WHERE c.contype = 'f' AND n.nspname = current_schema() AND c.conrelid <> c.confrelid
    """
)


async def delete_everything(s: AsyncSession, tenant_id: uuid.UUID) -> dict[str, int]:
    """Delete every row of a tenant, table by table (a table before the tables it references),
    then the tenant itself: rows deleted per table. For an owner session (RLS is not in the way)."""
    tables = set((await s.scalars(_TENANT_TABLES)).all())
    order: TopologicalSorter[str] = TopologicalSorter({t: set() for t in tables})
    for child, parent in (await s.execute(_REFERENCES)).all():
        if child in tables and parent in tables:
            order.add(parent, child)  # the referencing rows go first
    deleted: dict[str, int] = {}
    for table in order.static_order():
        # Table names come from the catalog, never from a request.
        result = await s.execute(text(f'DELETE FROM "{table}" WHERE tenant_id = :t'), {"t": tenant_id})
        deleted[table] = result.rowcount  # type: ignore[attr-defined]
    await s.execute(delete(Tenant).where(Tenant.id == tenant_id))
    return {t: n for t, n in sorted(deleted.items()) if n}


async def never_verified(s: AsyncSession, created_before: datetime) -> list[Tenant]:
    """Tenants made before ``created_before`` that no verified user and no API key ever stood for:
    self-serve sign-ups whose owner never followed the link (a tenant the operator made has a key
    or a verified owner)."""
    verified = exists().where(OAuthUser.tenant_id == Tenant.id, OAuthUser.email_verified_at.is_not(None))
    keyed = exists().where(ApiKey.tenant_id == Tenant.id)
    stmt = (
        select(Tenant)
        .where(Tenant.created_at < created_before, Tenant.id != SYSTEM_TENANT_ID, ~verified, ~keyed)
        .order_by(Tenant.created_at)
    )
    return list((await s.scalars(stmt)).all())
