"""What the timeline (retrieval/timeline.py) reads beside the fused hits: their vectors."""

from __future__ import annotations

import struct

from sqlalchemy import LargeBinary, func, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.memories.models import Memory
from memvault.retrieval.hits import Hit


async def vectors(s: AsyncSession, hits: list[Hit]) -> dict[object, list[float]]:
    """The hits' vectors (the fusion leaves them in the database): whether two say the same thing.
    One lookup by primary key, in the search's own tenant transaction.

    In pgvector's binary form: its text form took 2.7 ms of Python to parse for 20 hits at 384
    dimensions, two thirds of what the timeline added to a search (docs/benchmarks.md)."""
    if len(hits) < 2:
        return {}
    rows = await s.execute(
        select(Memory.id, func.vector_send(Memory.embedding, type_=LargeBinary)).where(
            tuple_(Memory.tenant_id, Memory.id).in_([(h.memory.tenant_id, h.memory.id) for h in hits])
        )
    )
    return {mid: floats(raw) for mid, raw in rows if raw is not None}


def floats(raw: bytes) -> list[float]:
    """A vector from pgvector's binary form (``vector_send``): its dimensions and a reserved
    field (two big-endian int16), then each element, a big-endian float4. The same values as its
    text form: both are the stored float4s exactly."""
    dimensions = int.from_bytes(raw[:2], "big")
    return list(struct.unpack(f">{dimensions}f", raw[4 : 4 + 4 * dimensions]))
