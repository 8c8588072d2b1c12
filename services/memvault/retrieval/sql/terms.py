"""The term statistics the lexical channel weighs words by (retrieval/lexical.py caches them)."""

from __future__ import annotations

import uuid

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.memories.models import Memory


async def namespace_size(s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID) -> tuple[int, float]:
    """How many live memories the namespace holds, and their average length in lexemes (1.0 when
    it has none)."""
    live = [Memory.tenant_id == tenant_id, Memory.namespace_id == namespace_id, Memory.superseded_at.is_(None)]
    row = (await s.execute(select(func.count(), func.avg(func.length(Memory.tsv))).where(*live))).one()
    return int(row[0]), float(row[1] or 1.0)


async def word_counts(s: AsyncSession, namespace_id: uuid.UUID, lexemes: list[str], cap: int) -> dict[str, int]:
    """How many of the namespace's live memories contain each lexeme, counted up to ``cap``; 0 for
    a lexeme none contains. Through memvault_word_counts, on the namespace's word index
    (migration 0013)."""
    counts = func.memvault_word_counts(namespace_id, lexemes, cap).table_valued("lexeme", "df")
    found = {lx: df for lx, df in (await s.execute(select(counts.c.lexeme, counts.c.df))).all()}
    return {lx: int(found.get(lx, 0)) for lx in lexemes}
