"""Whether a reader's scope chain is small: which way a search as that reader finds its words.

Reading as a user (or in a session) sees the namespace's shared memories and the reader's own.
In a namespace many users share, that is a few hundred rows of many thousands, and the lexical
channel's usual way (the namespace's best word matches first, then the reader's among them)
reads mostly other users' matches: for a small chain the search scores the reader's own rows
that hold a query word instead (retrieval/sql/words.py). Which way is decided per reader, from a
count kept a minute: a chain that grows past the limit meanwhile is still searched exactly,
only by the slower way for it.

A small chain also weighs its words by itself (``terms``): in a namespace of many people the
reader's own name is a rare word of the namespace, yet every memory the reader sees may say it,
and weighed as rare it made the shortest of them the best word match of any question naming the
reader. Counted in one pass over the chain (at most SMALL_CHAIN rows: 9.6 ms a search at 100,000
memories here, 2.5 of them in PostgreSQL), so kept a minute per reader, as its size is: only a
word no search of the reader's asked for meanwhile is counted then.
"""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from memvault.expiring import Expiring
from memvault.memories import reads_repository as memory_reads
from memvault.memories.schemas import MemoryFilters
from memvault.retrieval.lexical import TermStats
from memvault.retrieval.sql.chains import chain_size, chain_words

# A chain of at most this many memories is scored row by row (docs/benchmarks.md).
SMALL_CHAIN = 1000
# Word counts kept per reader; past it they start over.
WORDS_KEPT = 2000


def owner_read(filters: MemoryFilters | None) -> bool:
    """Whether a read is a user's or a session's, the reads whose chains can be small: the owner
    indexes find their rows (migration 0018). Only live reads: the others take another way."""
    f = filters or MemoryFilters()
    return memory_reads.live_read(f) and (f.user_id is not None or f.session_id is not None)


_Reader = tuple[uuid.UUID, uuid.UUID, str | None, str | None]


def _reader(tenant_id: uuid.UUID, namespace_id: uuid.UUID, filters: MemoryFilters) -> _Reader:
    return (tenant_id, namespace_id, filters.user_id, filters.session_id)


def _chain(filters: MemoryFilters) -> MemoryFilters:
    """The reader's chain alone: its user and session, the other filters left out."""
    return MemoryFilters(user_id=filters.user_id, session_id=filters.session_id)


class ReaderChains:
    """Whether each reader's scope chain is small, counted at most every ``ttl_s`` seconds, for at
    most ``readers`` readers."""

    def __init__(self, ttl_s: float = 60.0, readers: int = 10_000) -> None:
        self._known: Expiring[_Reader, bool] = Expiring(ttl_s, readers)
        self._words: Expiring[_Reader, TermStats] = Expiring(ttl_s, readers)

    async def small(
        self, s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, filters: MemoryFilters
    ) -> bool:

        async def count() -> bool:
            # Counting stops at the limit, however few rows a filter without an index (a date
            # range) keeps.
            return await chain_size(s, tenant_id, namespace_id, _chain(filters), up_to=SMALL_CHAIN + 1) <= SMALL_CHAIN

        return await self._known.value(_reader(tenant_id, namespace_id, filters), count)

    async def terms(
        self, s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, filters: MemoryFilters, lexemes: list[str]
    ) -> TermStats:
        """BM25's counts over the reader's chain (the other filters left out, as in ``small``), for
        a reader whose chain is small: kept as long as its size, the words a search has not asked
        for yet counted as it asks."""
        chain = _chain(filters)

        async def count() -> TermStats:
            n, avg_len, df = await chain_words(s, tenant_id, namespace_id, chain, lexemes)
            return TermStats(n=n, avg_len=avg_len, df=df)

        kept = await self._words.value(_reader(tenant_id, namespace_id, filters), count)
        missing = [lx for lx in lexemes if lx not in kept.df]
        if missing:
            _, _, df = await chain_words(s, tenant_id, namespace_id, chain, missing)
            if len(kept.df) + len(missing) > WORDS_KEPT:
                kept.df.clear()
            kept.df.update(df)
        return TermStats(n=kept.n, avg_len=kept.avg_len, df={lx: kept.df.get(lx, 0) for lx in lexemes})
