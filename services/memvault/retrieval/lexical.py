"""Term statistics for the lexical channel: how many of a namespace's live memories contain each
query word, so that rare words count for more than common ones (BM25's inverse document
frequency, which PostgreSQL's ts_rank_cd lacks).

Counted per namespace under the caller's tenant transaction (row-level security applies), and
cached for a short while: a word's frequency moves slowly, and a stale count only nudges a weight.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from sqlalchemy import cast, func, literal, select
from sqlalchemy.dialects.postgresql import TSQUERY
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.memories.models import Memory

# BM25's usual constants: k1 saturates repeated words, b scales by length against the average.
K1 = 1.2
B = 0.75


@dataclass(frozen=True)
class TermStats:
    """A namespace's size and average memory length in lexemes, and the document frequency of
    each query lexeme."""

    n: int
    avg_len: float
    df: dict[str, int] = field(default_factory=dict)

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

    def __init__(self, ttl_s: float = 60.0, namespaces: int = 1024, lexemes: int = 20_000) -> None:
        self._ttl = ttl_s
        self._max_ns = namespaces
        self._max_lexemes = lexemes
        self._entries: OrderedDict[tuple[uuid.UUID, uuid.UUID], _Entry] = OrderedDict()
        self._lock = threading.Lock()

    async def stats(
        self, s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, lexemes: list[str]
    ) -> TermStats:
        key = (tenant_id, namespace_id)
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and now - entry.at > self._ttl:
                entry = None
                del self._entries[key]
        live = [Memory.tenant_id == tenant_id, Memory.namespace_id == namespace_id, Memory.superseded_at.is_(None)]
        if entry is None:
            row = (await s.execute(select(func.count(), func.avg(func.length(Memory.tsv))).where(*live))).one()
            entry = _Entry(at=now, n=int(row[0]), avg_len=float(row[1] or 1.0), df={})
        missing = [lx for lx in lexemes if lx not in entry.df]
        if missing:
            counts = [func.count().filter(Memory.tsv.op("@@")(as_tsquery(lx))) for lx in missing]
            any_of = as_tsquery(*missing)
            found = (await s.execute(select(*counts).where(*live, Memory.tsv.op("@@")(any_of)))).one()
            if len(entry.df) + len(missing) > self._max_lexemes:
                entry.df.clear()
            entry.df.update(zip(missing, (int(c) for c in found), strict=True))
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_ns:
                self._entries.popitem(last=False)
        return TermStats(n=entry.n, avg_len=entry.avg_len, df={lx: entry.df[lx] for lx in lexemes})


def as_tsquery(*lexemes: str):  # type: ignore[no-untyped-def]
    """Lexemes as they are (already stemmed: no second normalisation), any of them matching."""
    text = " | ".join("'" + lx.replace("\\", "\\\\").replace("'", "''") + "'" for lx in lexemes)
    return cast(literal(text), TSQUERY)


async def query_lexemes(s: AsyncSession, query: str) -> list[str]:
    """The query's words as the english configuration indexes them (stemmed, stop words gone)."""
    found = await s.scalar(select(func.tsvector_to_array(func.to_tsvector("english", query))))
    return sorted(found or [])
