"""The size of a reader's scope chain (retrieval/chain.py decides from it which way to search)."""

from __future__ import annotations

import uuid

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.memories import reads_repository as memory_reads
from memvault.memories.models import Memory
from memvault.memories.schemas import MemoryFilters


async def chain_size(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, chain: MemoryFilters, *, up_to: int
) -> int:
    """How many memories the reader ``chain`` (its user and session) sees in the namespace,
    counted up to ``up_to``: the count stops there however many more there are."""
    rows = (
        select(Memory.id)
        .where(*memory_reads.read_conditions(tenant_id, namespace_id, chain))
        .limit(up_to)
        .subquery("chain")
    )
    return int((await s.execute(select(func.count()).select_from(rows))).scalar_one())
