from __future__ import annotations

import json
import uuid
from datetime import datetime

from sqlalchemy import delete, func, select, text
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


async def names(s: AsyncSession, tenant_id: uuid.UUID, allowed: frozenset[str] | None, *, limit: int) -> list[str]:
    stmt = select(Namespace.name).where(Namespace.tenant_id == tenant_id).order_by(Namespace.name).limit(limit)
    if allowed is not None:
        stmt = stmt.where(Namespace.name.in_(allowed))
    return list((await s.scalars(stmt)).all())


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


# Per namespace of one page: its rows counted up to :cap (an index-only walk of at most :cap
# entries, however large the namespace) and its newest row's time (the first entry of
# ix_memories_list). Exact counting stops at the cap: a larger figure comes from the planner.
_SUMMARY = """
SELECT n.id, c.rows, w.at
FROM namespaces n
CROSS JOIN LATERAL (
    SELECT count(*) AS rows FROM (
        SELECT 1 FROM memories m WHERE m.tenant_id = n.tenant_id AND m.namespace_id = n.id LIMIT :cap
    ) capped
) c
CROSS JOIN LATERAL (
    SELECT max(m.created_at) AS at FROM memories m WHERE m.tenant_id = n.tenant_id AND m.namespace_id = n.id
) w
WHERE n.tenant_id = :tenant AND n.name > :after{names}
ORDER BY n.name
LIMIT :limit
"""


async def summaries(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    names: frozenset[str] | None,
    *,
    after: str,
    limit: int,
    cap: int,
) -> list[tuple[Namespace, int, datetime | None]]:
    """Up to ``limit`` namespaces named after ``after``, by name, each with its memory rows counted
    up to ``cap`` and its last write."""
    params: dict[str, object] = {"tenant": tenant_id, "after": after, "limit": limit, "cap": cap}
    if names is not None:
        params["names"] = sorted(names)
    sql = _SUMMARY.format(names=" AND n.name = ANY(CAST(:names AS text[]))" if names is not None else "")
    rows = (await s.execute(text(sql), params)).all()
    if not rows:
        return []
    found = {
        ns.id: ns
        for ns in await s.scalars(
            select(Namespace).where(Namespace.tenant_id == tenant_id, Namespace.id.in_([r.id for r in rows]))
        )
    }
    return [(found[r.id], int(r.rows), r.at) for r in rows if r.id in found]


async def estimated_memories(s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID) -> int:
    """The planner's estimate of a namespace's memory rows (table statistics, no scan): what a
    namespace too large to count on every page view shows."""
    plan = await s.scalar(
        text("EXPLAIN (FORMAT JSON) SELECT 1 FROM memories WHERE tenant_id = :tenant AND namespace_id = :ns"),
        {"tenant": tenant_id, "ns": namespace_id},
    )
    doc = json.loads(plan) if isinstance(plan, str) else plan
    return int(doc[0]["Plan"]["Plan Rows"])
