"""Term statistics for the lexical channel: how many of a namespace's live memories contain each
query word, so that rare words count for more than common ones (BM25's inverse document
frequency, which PostgreSQL's ts_rank_cd lacks).

Counted per namespace under the caller's tenant transaction (row-level security applies), and
cached for a few minutes: a word's frequency moves slowly, and a stale count only nudges a weight.
Past that lifetime a search still uses the counts it has while the caller counts again beside it
(``stale``, ``refresh``): counting a namespace's size and average length reads all its memories,
90-210 ms at 100,000, which no search should wait for once the counts exist.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from sqlalchemy import ColumnElement, func
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.retrieval.sql.terms import namespace_size, word_counts

# BM25's usual constants: k1 saturates repeated words, b scales by length against the average.
K1 = 1.2
B = 0.75
# Document frequencies are counted up to this many memories. A word at the cap only scores the
# memories that other, rarer words of the query found: matching every memory that says "like"
# in a namespace of 100,000 costs tens of milliseconds and finds nothing specific.
DF_CAP = 2000


@dataclass(frozen=True)
class TermStats:
    """A namespace's size and average memory length in lexemes, and the document frequency of
    each query lexeme."""

    n: int
    avg_len: float
    df: dict[str, int] = field(default_factory=dict)

    def matching(self) -> list[str]:
        """The lexemes that pick candidates: all that occur, less the common ones unless nothing
        else is left (then the rarest of them)."""
        present = sorted((df, lx) for lx, df in self.df.items() if df > 0)
        rare = [lx for df, lx in present if df < DF_CAP]
        return rare or [lx for _, lx in present[:1]]

    def idf(self, lexeme: str) -> float:
        df = self.df.get(lexeme, 0)
        return math.log(1 + (self.n - df + 0.5) / (df + 0.5))


@dataclass
class _Entry:
    at: float
    n: int
    avg_len: float
    df: dict[str, int]


class TermStatsCache:
    """Per-namespace counts, kept ``ttl_s`` seconds, for at most ``namespaces`` namespaces."""

    def __init__(self, ttl_s: float = 300.0, namespaces: int = 1024, lexemes: int = 20_000) -> None:
        self._ttl = ttl_s
        self._max_ns = namespaces
        self._max_lexemes = lexemes
        self._entries: OrderedDict[tuple[uuid.UUID, uuid.UUID], _Entry] = OrderedDict()
        self._lock = threading.Lock()

    async def stats(
        self, s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, lexemes: list[str]
    ) -> TermStats:
        """The namespace's counts for ``lexemes``: counted now for a namespace seen for the first
        time and for words not yet counted, else as cached, however old (see ``stale``)."""
        key = (tenant_id, namespace_id)
        with self._lock:
            entry = self._entries.get(key)
        if entry is None:
            entry = await self._count(s, tenant_id, namespace_id)
        known = {lx: entry.df[lx] for lx in lexemes if lx in entry.df}
        missing = [lx for lx in lexemes if lx not in known]
        if missing:
            # Counted up to DF_CAP each: a word in that many memories is common whatever its exact
            # count.
            known.update(await word_counts(s, namespace_id, missing, DF_CAP))
            if len(entry.df) + len(missing) > self._max_lexemes:
                entry.df.clear()
            entry.df.update(known)
        # A refresh that finished meanwhile keeps its newer counts.
        self._keep(key, entry, replace=False)
        return TermStats(n=entry.n, avg_len=entry.avg_len, df=known)

    def stale(self, tenant_id: uuid.UUID, namespace_id: uuid.UUID) -> bool:
        """Whether the namespace's counts are older than their lifetime: ``refresh`` them."""
        with self._lock:
            entry = self._entries.get((tenant_id, namespace_id))
        return entry is not None and time.monotonic() - entry.at > self._ttl

    async def refresh(self, s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID) -> None:
        """Count the namespace's size and average length again. Its word counts start over: each
        is counted again, one key range of the word index, by the next search that asks for it."""
        self._keep((tenant_id, namespace_id), await self._count(s, tenant_id, namespace_id), replace=True)

    def _keep(self, key: tuple[uuid.UUID, uuid.UUID], entry: _Entry, *, replace: bool) -> None:
        """Cache ``entry`` as the most recently used (unless ``replace`` is off and the key has one
        already), within the cache's size."""
        with self._lock:
            if replace:
                self._entries[key] = entry
            if self._entries.setdefault(key, entry) is entry:
                self._entries.move_to_end(key)
            while len(self._entries) > self._max_ns:
                self._entries.popitem(last=False)

    async def _count(self, s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID) -> _Entry:
        at = time.monotonic()
        n, avg_len = await namespace_size(s, tenant_id, namespace_id)
        return _Entry(at=at, n=n, avg_len=avg_len, df={})


def tsquery_text(*lexemes: str) -> str:
    """Lexemes as a tsquery's text, taken as they are (already stemmed: no second normalisation),
    any of them matching."""
    return " | ".join("'" + lx.replace("\\", "\\\\").replace("'", "''") + "'" for lx in lexemes)


def lexemes_of(query: str | ColumnElement[str]):  # type: ignore[no-untyped-def]
    """The query's words as the english configuration indexes them (stemmed, stop words gone), as
    a text[] expression, read with another statement rather than in a round trip of their own."""
    return func.tsvector_to_array(func.to_tsvector("english", query))
