"""Relations between entities, and the walk over them that the graph view draws. Every function
filters by tenant and namespace explicitly; row-level security is the second lock, not the only
one. Entities themselves are in entities/repository.py."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Row, and_, delete, func, or_, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.db.pagination import newest_first
from memvault.entities.models import Relation
from memvault.entities.repository import EntityNotFound, by_ids
from memvault.entities.schemas import RelationIn

# The graph view stays a bounded answer however dense the graph is.
MAX_NEIGHBOURS = 500
MAX_GRAPH_RELATIONS = 1000


def _relation_scope(tenant_id: uuid.UUID, namespace_id: uuid.UUID) -> list[ColumnElement[bool]]:
    return [Relation.tenant_id == tenant_id, Relation.namespace_id == namespace_id]


def valid_at_condition(at: datetime) -> ColumnElement[bool]:
    """Valid time is half-open, [valid_from, valid_to): a relation ending at t no longer holds at t."""
    return and_(
        or_(Relation.valid_from.is_(None), Relation.valid_from <= at),
        or_(Relation.valid_to.is_(None), Relation.valid_to > at),
    )


# ---- graph ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hop:
    entity_id: uuid.UUID
    distance: int
    path: list[uuid.UUID]
    relation_path: list[uuid.UUID]


VALID_AT = " AND (r.valid_from IS NULL OR r.valid_from <= :at) AND (r.valid_to IS NULL OR r.valid_to > :at)"

# Every relation of a namespace as an edge each way (``{valid}``: VALID_AT or nothing), the start
# of the graph walk here and of the path search in graph/repository.py.
EDGES = """
WITH RECURSIVE edge (relation_id, from_id, to_id) AS (
    SELECT r.id, r.source_id, r.target_id FROM relations r
    WHERE r.tenant_id = :tenant AND r.namespace_id = :ns{valid}
    UNION ALL
    SELECT r.id, r.target_id, r.source_id FROM relations r
    WHERE r.tenant_id = :tenant AND r.namespace_id = :ns{valid}
),
"""

# A breadth-first walk, one row per level: each level holds the entities first reached at that
# distance, each with the entity and relation it was reached from. Relations are followed in both
# directions and `seen` keeps the walk from returning to an entity, so cycles end. Tracking the
# visited set per level rather than every path keeps the work proportional to the relations
# touched (a walk that kept each path would enumerate n^3 paths in a dense graph at 3 hops).
_WALK = (
    EDGES
    + """level (distance, nodes, parents, relations, seen) AS (
    SELECT 0, ARRAY[CAST(:root AS uuid)], CAST(ARRAY[] AS uuid[]), CAST(ARRAY[] AS uuid[]), ARRAY[CAST(:root AS uuid)]
    UNION ALL
    SELECT l.distance + 1, step.nodes, step.parents, step.relations, l.seen || step.nodes
    FROM level l
    CROSS JOIN LATERAL (
        SELECT array_agg(d.to_id ORDER BY d.to_id) AS nodes,
               array_agg(d.from_id ORDER BY d.to_id) AS parents,
               array_agg(d.relation_id ORDER BY d.to_id) AS relations
        FROM (
            SELECT DISTINCT ON (e.to_id) e.to_id, e.from_id, e.relation_id
            FROM edge e
            WHERE e.from_id = ANY (l.nodes) AND e.to_id <> ALL (l.seen)
            ORDER BY e.to_id, e.from_id, e.relation_id
        ) d
    ) step
    WHERE l.distance < :hops AND step.nodes IS NOT NULL
)
SELECT u.entity_id, l.distance, u.parent_id, u.relation_id
FROM level l, unnest(l.nodes, l.parents, l.relations) AS u (entity_id, parent_id, relation_id)
WHERE l.distance > 0
ORDER BY l.distance, u.entity_id
LIMIT :cap
"""
)


async def neighbours(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    root_id: uuid.UUID,
    hops: int,
    valid_at: datetime | None,
) -> tuple[list[Hop], bool]:
    """Entities within `hops` relations of `root_id`, in either direction, nearest first, each with
    one shortest path: one recursive query. Also says whether MAX_NEIGHBOURS cut the answer."""
    if hops <= 0:
        return [], False
    sql = _WALK.format(valid=VALID_AT if valid_at is not None else "")
    params: dict[str, Any] = {"tenant": tenant_id, "ns": namespace_id, "root": root_id, "hops": hops}
    params |= {"cap": MAX_NEIGHBOURS + 1, **({"at": valid_at} if valid_at is not None else {})}
    rows: Sequence[Row[Any]] = (await s.execute(text(sql), params)).all()
    truncated = len(rows) > MAX_NEIGHBOURS
    # Rows come nearest first, so every parent is known before its children.
    reached: dict[uuid.UUID, Hop] = {root_id: Hop(root_id, 0, [root_id], [])}
    hops_found: list[Hop] = []
    for r in rows[:MAX_NEIGHBOURS]:
        parent = reached[r.parent_id]
        hop = Hop(r.entity_id, r.distance, [*parent.path, r.entity_id], [*parent.relation_path, r.relation_id])
        reached[r.entity_id] = hop
        hops_found.append(hop)
    return hops_found, truncated


async def relations_among(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    ids: Sequence[uuid.UUID],
    valid_at: datetime | None,
) -> tuple[list[Relation], bool]:
    """Relations with both ends among `ids`, oldest first, and whether MAX_GRAPH_RELATIONS cut them."""
    stmt = select(Relation).where(
        *_relation_scope(tenant_id, namespace_id), Relation.source_id.in_(list(ids)), Relation.target_id.in_(list(ids))
    )
    if valid_at is not None:
        stmt = stmt.where(valid_at_condition(valid_at))
    stmt = stmt.order_by(Relation.created_at, Relation.id).limit(MAX_GRAPH_RELATIONS + 1)
    rows = list((await s.scalars(stmt)).all())
    return rows[:MAX_GRAPH_RELATIONS], len(rows) > MAX_GRAPH_RELATIONS


# ---- relations ------------------------------------------------------------------------------


async def insert_relation(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, body: RelationIn, actor: str
) -> Relation:
    found = await by_ids(s, tenant_id, namespace_id, [body.source_id, body.target_id])
    for field in ("source_id", "target_id"):
        entity_id = getattr(body, field)
        if entity_id not in found:
            raise EntityNotFound(f"No entity {entity_id} in this namespace.", extra={"field": field})
    stmt = (
        insert(Relation)
        .values(
            tenant_id=tenant_id,
            namespace_id=namespace_id,
            source_id=body.source_id,
            type=body.type,
            target_id=body.target_id,
            valid_from=body.valid_from,
            valid_to=body.valid_to,
            confidence=body.confidence,
            metadata_=body.metadata,
            created_by=actor,
        )
        .returning(Relation)
    )
    relation = await s.scalar(stmt)
    assert relation is not None
    return relation


async def page_relations(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    *,
    entity_id: uuid.UUID | None,
    type_: str | None,
    valid_at: datetime | None,
    limit: int,
    cursor: str | None,
) -> tuple[list[Relation], str | None]:
    """Newest first, keyset-paginated on (created_at, id)."""
    stmt = select(Relation).where(*_relation_scope(tenant_id, namespace_id))
    if entity_id is not None:
        stmt = stmt.where(or_(Relation.source_id == entity_id, Relation.target_id == entity_id))
    if type_ is not None:
        stmt = stmt.where(Relation.type == type_)
    if valid_at is not None:
        stmt = stmt.where(valid_at_condition(valid_at))
    rows, next_cursor = await newest_first(s, stmt, Relation.created_at, Relation.id, limit=limit, cursor=cursor)
    return list(rows), next_cursor


async def remove_relation(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, relation_id: uuid.UUID
) -> bool:
    stmt = (
        delete(Relation)
        .where(*_relation_scope(tenant_id, namespace_id), Relation.id == relation_id)
        .returning(Relation.id)
    )
    return (await s.scalar(stmt)) is not None


# ---- facts (facts/service.py) ---------------------------------------------------------------


async def open_relation(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    source_id: uuid.UUID,
    type_: str,
    target_id: uuid.UUID,
    valid_to: datetime | None,
) -> Relation | None:
    """A relation source --type--> target ending at ``valid_to`` (None: one that has not ended)."""
    stmt = select(Relation).where(
        *_relation_scope(tenant_id, namespace_id),
        Relation.source_id == source_id,
        Relation.type == type_,
        Relation.target_id == target_id,
        Relation.valid_to.is_(None) if valid_to is None else Relation.valid_to == valid_to,
    )
    return await s.scalar(stmt.limit(1))


async def end_fact_relations(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    fact_key: str,
    keep_id: uuid.UUID,
    at: datetime | None,
) -> int:
    """End the open relations an earlier version of the fact ``fact_key`` recorded (not ``keep_id``):
    the fact that superseded it says they no longer hold from ``at`` (now if None)."""
    end = at if at is not None else func.now()
    stmt = (
        update(Relation)
        .where(
            *_relation_scope(tenant_id, namespace_id),
            Relation.metadata_["fact_key"].astext == fact_key,
            Relation.id != keep_id,
            Relation.valid_to.is_(None),
            # One that starts only after the new fact does is left alone rather than given an end
            # before its start.
            or_(Relation.valid_from.is_(None), Relation.valid_from < end),
        )
        .values(valid_to=end)
        .returning(Relation.id)
    )
    return len((await s.scalars(stmt)).all())
