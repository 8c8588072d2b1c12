"""What the timeline (retrieval/timeline.py) reads beside the fused hits: their vectors."""

from __future__ import annotations

from sqlalchemy import select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.memories.models import Memory
from memvault.retrieval.hits import Hit


async def vectors(s: AsyncSession, hits: list[Hit]) -> dict[object, list[float]]:
    """The hits' vectors (the fusion leaves them in the database): whether two say the same thing.
    One lookup by primary key, in the search's own tenant transaction."""
    if len(hits) < 2:
        return {}
    rows = await s.execute(
        select(Memory.id, Memory.embedding).where(
            tuple_(Memory.tenant_id, Memory.id).in_([(h.memory.tenant_id, h.memory.id) for h in hits])
        )
    )
    return {mid: [float(x) for x in vec] for mid, vec in rows if vec is not None}
