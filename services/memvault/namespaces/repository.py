from __future__ import annotations

import uuid

from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.memories.models import Memory
from memvault.namespaces.models import Namespace


async def by_name(s: AsyncSession, tenant_id: uuid.UUID, name: str) -> Namespace | None:
    return await s.scalar(select(Namespace).where(Namespace.tenant_id == tenant_id, Namespace.name == name))


async def create(s: AsyncSession, tenant_id: uuid.UUID, name: str, description: str | None) -> Namespace | None:
    """Insert, or return None when the name is taken (no exception, so the transaction survives)."""
    stmt = (
        insert(Namespace)
        .values(tenant_id=tenant_id, name=name, description=description)
        .on_conflict_do_nothing(index_elements=["tenant_id", "name"])
        .returning(Namespace)
    )
    return await s.scalar(stmt)


async def list_with_counts(
    s: AsyncSession, tenant_id: uuid.UUID, names: frozenset[str] | None
) -> list[tuple[Namespace, int]]:
    counts = (
        select(Memory.namespace_id, func.count().label("n"))
        .where(Memory.tenant_id == tenant_id)
        .group_by(Memory.namespace_id)
        .subquery()
    )
    stmt = (
        select(Namespace, func.coalesce(counts.c.n, 0))
        .outerjoin(counts, counts.c.namespace_id == Namespace.id)
        .where(Namespace.tenant_id == tenant_id)
        .order_by(Namespace.name)
    )
    if names is not None:
        stmt = stmt.where(Namespace.name.in_(names))
    return [(ns, n) for ns, n in (await s.execute(stmt)).all()]


async def save(s: AsyncSession, ns: Namespace) -> None:
    """Write the changes made to a loaded namespace now, so what follows in the transaction (the
    audit entry, the count) runs after them."""
    await s.flush()


async def count_memories(s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID) -> int:
    stmt = select(func.count()).where(Memory.tenant_id == tenant_id, Memory.namespace_id == namespace_id)
    return int(await s.scalar(stmt) or 0)


async def remove(s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID) -> None:
    # Memories go with it through the foreign key's ON DELETE CASCADE.
    await s.execute(delete(Namespace).where(Namespace.tenant_id == tenant_id, Namespace.id == namespace_id))
