"""Counts behind the MCP overview resources (memory://stats, memory://graph/stats) and the lookup
of a memory's namespace. Every statement filters by tenant and namespace; row-level security is
the second lock. Sizes are summed over the namespace's own rows, never read from a shared index,
so they say nothing about other tenants."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Table, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.entities.models import Entity, Relation
from memvault.memories.models import Memory
from memvault.namespaces.models import Namespace

_MEMORIES: Table = Memory.__table__  # type: ignore[assignment]


async def memory_counts(s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID) -> dict[str, Any]:
    """Current memories by type and state, and the namespace's share of the store: every row kept
    (versions included), those with a vector, and their bytes as PostgreSQL stores them."""
    mine = (Memory.tenant_id == tenant_id, Memory.namespace_id == namespace_id)
    by = await s.execute(
        select(Memory.type, Memory.state, func.count())
        .where(*mine, Memory.superseded_at.is_(None))
        .group_by(Memory.type, Memory.state)
    )
    types: dict[str, int] = {}
    states: dict[str, int] = {}
    for type_, state, n in by.all():
        types[type_] = types.get(type_, 0) + n
        states[state] = states.get(state, 0) + n
    rows, vectors, size = (
        await s.execute(
            select(
                func.count(),
                func.count(Memory.embedding),
                func.coalesce(func.sum(func.pg_column_size(_MEMORIES.table_valued())), 0),
            ).where(*mine)
        )
    ).one()
    return {
        "current": sum(types.values()),
        "by_type": dict(sorted(types.items())),
        "by_state": dict(sorted(states.items())),
        "index": {"rows": int(rows), "vectors": int(vectors), "bytes": int(size)},
    }


async def graph_counts(s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID) -> dict[str, Any]:
    """Entities and relations of one namespace, by type."""
    entities = await s.execute(
        select(Entity.type, func.count())
        .where(Entity.tenant_id == tenant_id, Entity.namespace_id == namespace_id)
        .group_by(Entity.type)
    )
    relations = await s.execute(
        select(Relation.type, func.count())
        .where(Relation.tenant_id == tenant_id, Relation.namespace_id == namespace_id)
        .group_by(Relation.type)
    )
    e = {t: int(n) for t, n in entities.all()}
    r = {t: int(n) for t, n in relations.all()}
    return {
        "entities": {"total": sum(e.values()), "by_type": dict(sorted(e.items()))},
        "relations": {"total": sum(r.values()), "by_type": dict(sorted(r.items()))},
    }


async def namespace_of_memory(s: AsyncSession, tenant_id: uuid.UUID, memory_id: uuid.UUID) -> tuple[bool, str | None]:
    """(found, namespace name) of one of the tenant's memories; a tenant-scope memory has no
    namespace (None)."""
    row = (
        await s.execute(
            select(Namespace.name)
            .select_from(Memory)
            .outerjoin(Namespace, (Namespace.tenant_id == Memory.tenant_id) & (Namespace.id == Memory.namespace_id))
            .where(Memory.tenant_id == tenant_id, Memory.id == memory_id)
        )
    ).first()
    return (False, None) if row is None else (True, row[0])
