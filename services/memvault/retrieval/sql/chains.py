"""The size of a reader's scope chain (retrieval/chain.py decides from it which way to search),
and the word counts of a small one."""

from __future__ import annotations

import uuid

from sqlalchemy import cast, func, literal, select
from sqlalchemy.dialects.postgresql import TSQUERY
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.memories import reads_repository as memory_reads
from memvault.memories.models import Memory
from memvault.memories.schemas import MemoryFilters
from memvault.retrieval.lexical import tsquery_text


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


async def chain_words(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, chain: MemoryFilters, lexemes: list[str]
) -> tuple[int, float, dict[str, int]]:
    """How many memories the reader ``chain`` sees, their average length in lexemes (1.0 when it
    sees none), and how many of them contain each lexeme: one pass over the chain's rows."""
    rows = select(Memory.tsv).where(*memory_reads.read_conditions(tenant_id, namespace_id, chain)).subquery("chain")
    holding = [func.count().filter(rows.c.tsv.op("@@")(cast(literal(tsquery_text(lx)), TSQUERY))) for lx in lexemes]
    row = (await s.execute(select(func.count(), func.avg(func.length(rows.c.tsv)), *holding))).one()
    return int(row[0]), float(row[1] or 1.0), {lx: int(df) for lx, df in zip(lexemes, row[2:], strict=True)}
