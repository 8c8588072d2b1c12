"""Read-only graph queries over the entity tables (migration 0002): paths between two entities,
the entities related to one, and what a drawable export of a namespace, user or session holds.
Every query filters by tenant and namespace explicitly and runs in the caller's tenant
transaction, so row-level security is the second lock. User input is always a bound parameter."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, and_, or_, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.entities.models import Entity, MemoryEntity, Relation
from memvault.entities.relations_repository import EDGES, VALID_AT, valid_at_condition
from memvault.memories.models import Memory
from memvault.memories.schemas import MemoryState

# Simple paths from :source to :target, relations followed in either direction. A walk only steps
# onto an entity close enough to the target to arrive within the depth left (`near` holds each
# entity's distance to the target, from one breadth-first walk), so it never wanders away from
# the target. A recursive query yields its rows level by level and PostgreSQL evaluates it only
# as far as the outer query reads, so LIMIT keeps the shortest paths and stops the walk there.
_PATHS = (
    EDGES
    + """near (id, dist) AS (
    SELECT * FROM unnest(CAST(:near_ids AS uuid[]), CAST(:near_dists AS integer[]))
),
walk (node, depth, nodes, relations) AS (
    SELECT CAST(:source AS uuid), 0, ARRAY[CAST(:source AS uuid)], CAST(ARRAY[] AS uuid[])
    UNION ALL
    SELECT e.to_id, w.depth + 1, w.nodes || e.to_id, w.relations || e.relation_id
    FROM walk w
    JOIN edge e ON e.from_id = w.node
    JOIN near n ON n.id = e.to_id AND n.dist <= :depth - w.depth - 1
    WHERE w.depth < :depth AND w.node <> CAST(:target AS uuid) AND e.to_id <> ALL (w.nodes)
)
SELECT nodes, relations FROM walk WHERE node = CAST(:target AS uuid)
LIMIT :cap
"""
)


async def paths(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    source_id: uuid.UUID,
    target_id: uuid.UUID,
    *,
    depth: int,
    near: dict[uuid.UUID, int],
    cap: int,
    valid_at: datetime | None,
) -> list[tuple[list[uuid.UUID], list[uuid.UUID]]]:
    """Up to `cap` simple paths (entity ids, relation ids) of at most `depth` relations, shortest
    first. `near`: the distance to the target of every entity a path may pass through."""
    sql = _PATHS.format(valid=VALID_AT if valid_at is not None else "")
    params: dict[str, Any] = {
        "tenant": tenant_id,
        "ns": namespace_id,
        "source": source_id,
        "target": target_id,
        "depth": depth,
        "near_ids": list(near),
        "near_dists": list(near.values()),
        "cap": cap,
        **({"at": valid_at} if valid_at is not None else {}),
    }
    rows = (await s.execute(text(sql), params)).all()
    found = [(list(r.nodes), list(r.relations)) for r in rows]
    return sorted(found, key=lambda p: len(p[1]))


async def relations_by_ids(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, Relation]:
    if not ids:
        return {}
    stmt = select(Relation).where(
        Relation.tenant_id == tenant_id, Relation.namespace_id == namespace_id, Relation.id.in_(list(ids))
    )
    return {r.id: r for r in (await s.scalars(stmt)).all()}


async def related(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    entity_id: uuid.UUID,
    *,
    type_: str | None,
    relation_type: str | None,
    direction: str,
    valid_at: datetime | None,
    limit: int,
) -> list[tuple[Relation, Entity]]:
    """The relations with `entity_id` at one end, each with the entity at the other end, by that
    entity's name; `direction` `out` keeps those where `entity_id` is the source, `in` the target."""
    outgoing = and_(Relation.source_id == entity_id, Entity.id == Relation.target_id)
    incoming = and_(Relation.target_id == entity_id, Entity.id == Relation.source_id)
    ends = {"out": outgoing, "in": incoming}.get(direction, or_(outgoing, incoming))
    stmt = (
        select(Relation, Entity)
        .join(Entity, and_(Entity.tenant_id == Relation.tenant_id, ends))
        .where(
            Relation.tenant_id == tenant_id,
            Relation.namespace_id == namespace_id,
            Entity.namespace_id == namespace_id,
        )
    )
    if type_ is not None:
        stmt = stmt.where(Entity.type == type_)
    if relation_type is not None:
        stmt = stmt.where(Relation.type == relation_type)
    if valid_at is not None:
        stmt = stmt.where(valid_at_condition(valid_at))
    stmt = stmt.order_by(Entity.name, Entity.id, Relation.created_at, Relation.id).limit(limit)
    return [(r, e) for r, e in (await s.execute(stmt)).all()]


async def relations_touching(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, ids: Sequence[uuid.UUID], limit: int
) -> list[Relation]:
    """Up to ``limit`` relations with an end among ``ids``, newest first: one step out from a
    memory's entities."""
    if not ids:
        return []
    stmt = (
        select(Relation)
        .where(
            Relation.tenant_id == tenant_id,
            Relation.namespace_id == namespace_id,
            or_(Relation.source_id.in_(list(ids)), Relation.target_id.in_(list(ids))),
        )
        .order_by(Relation.created_at.desc(), Relation.id)
        .limit(limit)
    )
    return list((await s.scalars(stmt)).all())


# ---- export ---------------------------------------------------------------------------------

MemoryRow = Row[uuid.UUID, str, str, datetime]


def _current(tenant_id: uuid.UUID, namespace_id: uuid.UUID) -> list[Any]:
    return [
        Memory.tenant_id == tenant_id,
        Memory.namespace_id == namespace_id,
        Memory.superseded_at.is_(None),
        Memory.state != MemoryState.archived.value,
    ]


async def owned_memories(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    *,
    user_id: str | None,
    session_id: str | None,
    limit: int,
) -> list[MemoryRow]:
    """The current memories of one user and/or session that are linked to an entity, newest first."""
    linked = select(MemoryEntity.memory_id).where(
        MemoryEntity.tenant_id == tenant_id, MemoryEntity.memory_id == Memory.id
    )
    stmt = select(Memory.id, Memory.type, Memory.content, Memory.created_at).where(
        *_current(tenant_id, namespace_id), linked.exists()
    )
    if user_id is not None:
        stmt = stmt.where(Memory.user_id == user_id)
    if session_id is not None:
        stmt = stmt.where(Memory.session_id == session_id)
    stmt = stmt.order_by(Memory.created_at.desc(), Memory.id.desc()).limit(limit)
    return list((await s.execute(stmt)).all())


async def shared_memories_of(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, entity_ids: Sequence[uuid.UUID], limit: int
) -> list[MemoryRow]:
    """The namespace's shared (namespace-scope) current memories linked to any of `entity_ids`."""
    linked = select(MemoryEntity.memory_id).where(
        MemoryEntity.tenant_id == tenant_id,
        MemoryEntity.memory_id == Memory.id,
        MemoryEntity.entity_id.in_(list(entity_ids)),
    )
    stmt = (
        select(Memory.id, Memory.type, Memory.content, Memory.created_at)
        .where(*_current(tenant_id, namespace_id), Memory.scope == "namespace", linked.exists())
        .order_by(Memory.created_at.desc(), Memory.id.desc())
        .limit(limit)
    )
    return list((await s.execute(stmt)).all())


async def links(
    s: AsyncSession, tenant_id: uuid.UUID, memory_ids: Sequence[uuid.UUID]
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """(memory id, entity id) of every link of these memories."""
    if not memory_ids:
        return []
    stmt = (
        select(MemoryEntity.memory_id, MemoryEntity.entity_id)
        .where(MemoryEntity.tenant_id == tenant_id, MemoryEntity.memory_id.in_(list(memory_ids)))
        .order_by(MemoryEntity.memory_id, MemoryEntity.entity_id)
    )
    return [(m, e) for m, e in (await s.execute(stmt)).all()]


async def newest_entities(s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, limit: int) -> list[Entity]:
    stmt = (
        select(Entity)
        .where(Entity.tenant_id == tenant_id, Entity.namespace_id == namespace_id)
        .order_by(Entity.created_at.desc(), Entity.id.desc())
        .limit(limit)
    )
    return list((await s.scalars(stmt)).all())
