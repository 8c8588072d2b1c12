"""First hybrid search: dense (pgvector HNSW, cosine) and lexical (full text) candidates fused by
reciprocal rank, all in one SQL statement inside the caller's tenant transaction.

The retrieval issue grows this into a multi-signal engine; the shape that stays is
``candidates -> signals -> fusion -> results with explanations and metrics``.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from sqlalchemy import Float, Integer, Text, cast, func, literal, select, text, union_all
from sqlalchemy.dialects.postgresql import TSQUERY
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.memories import repository as memories_repo
from memvault.memories.models import Memory
from memvault.memories.schemas import MemoryFilters
from memvault.principal import SYSTEM_TENANT_ID

RRF_K = 60


@dataclass
class Hit:
    memory: Memory
    score: float
    semantic_relevance: float | None
    dense_rank: int | None
    lexical_rank: int | None
    lexical_score: float | None


@dataclass
class SearchOutcome:
    hits: list[Hit]
    matched_by: dict[str, int] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)
    backend_failures: list[str] = field(default_factory=list)


def lexical_query(query: str):  # type: ignore[no-untyped-def]
    """Any of the query's words, not all of them: natural-language questions rarely share every
    word with the memory that answers them. Stop words are dropped by the english parser."""
    return cast(func.replace(cast(func.plainto_tsquery("english", query), Text), "&", "|"), TSQUERY)


async def hybrid_search(
    s: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    query: str,
    query_vector: list[float] | None,
    model_id: str,
    filters: MemoryFilters | None,
    limit: int,
    candidates: int,
    weights: tuple[float, float] = (1.0, 1.0),
) -> SearchOutcome:
    started = time.perf_counter()
    where = memories_repo.read_conditions(tenant_id, namespace_id, filters)
    w_dense, w_lex = weights

    # pgvector 0.8: keep scanning the HNSW graph until enough rows pass the filters, instead of
    # returning fewer than asked when the tenant's rows are a small part of the index.
    await s.execute(text("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)"))
    await s.execute(text("SELECT set_config('hnsw.ef_search', :ef, true)"), {"ef": str(max(64, candidates))})

    tsq = lexical_query(query)
    lex_inner = (
        select(Memory.id, func.ts_rank_cd(Memory.tsv, tsq).label("lex_score"))
        .where(*where, Memory.tsv.op("@@")(tsq))
        .order_by(func.ts_rank_cd(Memory.tsv, tsq).desc())
        .limit(candidates)
        .subquery("lex_inner")
    )
    lex_ranked = select(
        lex_inner.c.id,
        cast(literal(None), Integer).label("dense_rank"),
        func.row_number().over(order_by=lex_inner.c.lex_score.desc()).label("lexical_rank"),
        lex_inner.c.lex_score,
    )

    if query_vector is not None:
        dist = Memory.embedding.cosine_distance(query_vector)
        dense_inner = (
            select(Memory.id, dist.label("dist"))
            .where(*where, Memory.embedding_model == model_id, Memory.embedding.is_not(None))
            .order_by(dist)
            .limit(candidates)
            .subquery("dense_inner")
        )
        dense_ranked = select(
            dense_inner.c.id,
            func.row_number().over(order_by=dense_inner.c.dist).label("dense_rank"),
            cast(literal(None), Integer).label("lexical_rank"),
            cast(literal(None), Float).label("lex_score"),
        )
        # UNION ALL + GROUP BY rather than a FULL JOIN: the fused id stays a plain column, so the
        # final join reaches each memory by primary key instead of filtering a scan.
        both = union_all(dense_ranked, lex_ranked).subquery("both")
        fused = (
            select(
                both.c.id,
                func.min(both.c.dense_rank).label("dense_rank"),
                func.min(both.c.lexical_rank).label("lexical_rank"),
                func.max(both.c.lex_score).label("lex_score"),
            )
            .group_by(both.c.id)
            .subquery("fused")
        )
        rrf = func.coalesce(w_dense / (RRF_K + fused.c.dense_rank), 0.0) + func.coalesce(
            w_lex / (RRF_K + fused.c.lexical_rank), 0.0
        )
        cosine = (1 - Memory.embedding.cosine_distance(query_vector)).label("cosine")
    else:
        fused = lex_ranked.subquery("fused")
        rrf = func.coalesce(w_lex / (RRF_K + fused.c.lexical_rank), 0.0)
        cosine = cast(literal(None), Float).label("cosine")

    stmt = (
        select(Memory, rrf.label("rrf"), cosine, fused.c.dense_rank, fused.c.lexical_rank, fused.c.lex_score)
        # Both the tenant's rows and the system tenant's shared ones can be hits.
        .join(fused, (Memory.id == fused.c.id) & Memory.tenant_id.in_([tenant_id, SYSTEM_TENANT_ID]))
        .order_by(rrf.desc(), Memory.id)
        .limit(limit)
    )
    rows = (await s.execute(stmt)).all()
    # Normalise so that rank 1 in every channel scores 1.0: scores read the same across requests.
    best = (w_dense if query_vector is not None else 0.0) + w_lex
    best_possible = best / (RRF_K + 1) if best > 0 else 1.0
    hits = [
        Hit(
            memory=m,
            score=round(float(r) / best_possible, 6),
            semantic_relevance=None if c is None else round(float(c), 6),
            dense_rank=dr,
            lexical_rank=lr,
            lexical_score=None if ls is None else float(ls),
        )
        for m, r, c, dr, lr, ls in rows
    ]
    elapsed = (time.perf_counter() - started) * 1000
    return SearchOutcome(
        hits=hits,
        matched_by={
            "dense": sum(1 for h in hits if h.dense_rank is not None),
            "lexical": sum(1 for h in hits if h.lexical_rank is not None),
        },
        timings_ms={"sql": round(elapsed, 2)},
    )
