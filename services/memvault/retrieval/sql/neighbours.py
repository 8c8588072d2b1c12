"""The session neighbours a search shows around its hits (``SearchIn.neighbours``)."""

from __future__ import annotations

import uuid

from sqlalchemy import select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.memories import repository as memories_repo
from memvault.memories.models import Memory
from memvault.memories.schemas import MemoryFilters
from memvault.retrieval.sql.common import session_order


async def neighbours_of(
    s: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    filters: MemoryFilters | None,
    memories: list[Memory],
    n: int,
) -> dict[uuid.UUID, list[Memory]]:
    """Up to ``n`` memories before and after each memory in its session, in session order (valid
    time, then insertion order), under the same visibility rules as the search itself."""
    where = memories_repo.read_conditions(tenant_id, namespace_id, filters)
    order = session_order(Memory)
    out: dict[uuid.UUID, list[Memory]] = {}
    for m in memories:
        if m.session_id is None:
            out[m.id] = []
            continue
        key = (m.valid_from or m.created_at, m.seq)
        same = [*where, Memory.tenant_id == tenant_id, Memory.session_id == m.session_id]
        before = (
            await s.scalars(
                select(Memory).where(*same, tuple_(*order) < tuple_(*key)).order_by(*(c.desc() for c in order)).limit(n)
            )
        ).all()
        after = (
            await s.scalars(select(Memory).where(*same, tuple_(*order) > tuple_(*key)).order_by(*order).limit(n))
        ).all()
        out[m.id] = [*reversed(before), *after]
    return out
