from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Float,
    cast,
    delete,
    func,
    insert,
    literal,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.db.pagination import newest_first
from memvault.retrieval.sql.candidates import fused_candidates
from memvault.retrieval.sql.common import RRF_K
from memvault.traces.models import Trace, TraceStep


@dataclass(frozen=True)
class TraceFilters:
    status: str | None = None
    success: bool | None = None
    user_id: str | None = None
    agent_id: str | None = None


def _where(tenant_id: uuid.UUID, namespace_id: uuid.UUID, f: TraceFilters) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = [Trace.tenant_id == tenant_id, Trace.namespace_id == namespace_id]
    if f.status is not None:
        conds.append(Trace.status == f.status)
    if f.success is not None:
        conds.append(Trace.success.is_(f.success))
    if f.user_id is not None:
        conds.append(Trace.user_id == f.user_id)
    if f.agent_id is not None:
        conds.append(Trace.agent_id == f.agent_id)
    return conds


async def insert_trace(s: AsyncSession, row: dict[str, Any]) -> Trace:
    result = await s.scalar(insert(Trace).values(**row).returning(Trace))
    assert result is not None
    return result


async def get(s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, trace_id: uuid.UUID) -> Trace | None:
    return await s.scalar(
        select(Trace).where(Trace.tenant_id == tenant_id, Trace.namespace_id == namespace_id, Trace.id == trace_id),
        execution_options={"populate_existing": True},
    )


async def next_seq(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, trace_id: uuid.UUID, max_steps: int
) -> int | None:
    """Claim the next step number of an open trace with room left, or None.

    One UPDATE both checks and increments: the row lock it takes queues concurrent steps (and a
    concurrent completion) behind it until commit, so no two steps get the same number and no step
    lands after the trace completed."""
    return await s.scalar(
        update(Trace)
        .where(
            Trace.tenant_id == tenant_id,
            Trace.namespace_id == namespace_id,
            Trace.id == trace_id,
            Trace.status == "open",
            Trace.step_count < max_steps,
        )
        .values(step_count=Trace.step_count + 1)
        .returning(Trace.step_count),
        execution_options={"synchronize_session": False},
    )


async def insert_step(s: AsyncSession, row: dict[str, Any]) -> TraceStep:
    result = await s.scalar(insert(TraceStep).values(**row).returning(TraceStep))
    assert result is not None
    return result


async def complete(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    trace_id: uuid.UUID,
    values: dict[str, Any],
) -> Trace | None:
    """Complete an open trace; None if it is not there or no longer open (the caller tells which)."""
    return await s.scalar(
        update(Trace)
        .where(
            Trace.tenant_id == tenant_id,
            Trace.namespace_id == namespace_id,
            Trace.id == trace_id,
            Trace.status == "open",
        )
        .values(**values, status="completed", completed_at=func.now())
        .returning(Trace),
        execution_options={"synchronize_session": False, "populate_existing": True},
    )


async def steps_of(
    s: AsyncSession, tenant_id: uuid.UUID, trace_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, list[TraceStep]]:
    """Every step of these traces, in order, by one query."""
    out: dict[uuid.UUID, list[TraceStep]] = {i: [] for i in trace_ids}
    if not trace_ids:
        return out
    rows = await s.scalars(
        select(TraceStep)
        .where(TraceStep.tenant_id == tenant_id, TraceStep.trace_id.in_(list(trace_ids)))
        .order_by(TraceStep.trace_id, TraceStep.seq)
    )
    for step in rows:
        out[step.trace_id].append(step)
    return out


async def remove(s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, trace_id: uuid.UUID) -> int | None:
    """Delete a trace and its steps (ON DELETE CASCADE); the number of steps deleted, or None if absent."""
    return await s.scalar(
        delete(Trace)
        .where(Trace.tenant_id == tenant_id, Trace.namespace_id == namespace_id, Trace.id == trace_id)
        .returning(Trace.step_count)
    )


async def page(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    filters: TraceFilters,
    *,
    limit: int,
    cursor: str | None,
) -> tuple[list[Trace], str | None]:
    """Newest first, keyset-paginated on (started_at, id) so pages never skip or repeat rows."""
    stmt = select(Trace).where(*_where(tenant_id, namespace_id, filters))
    rows, next_cursor = await newest_first(s, stmt, Trace.started_at, Trace.id, limit=limit, cursor=cursor)
    return list(rows), next_cursor


@dataclass
class Hit:
    trace: Trace
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


async def search(
    s: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    query: str,
    query_vector: list[float] | None,
    model_id: str,
    filters: TraceFilters,
    limit: int,
    candidates: int,
) -> SearchOutcome:
    """Dense (HNSW, cosine) and full-text candidates fused by reciprocal rank in one statement, the
    way retrieval/sql/candidates.py searches memories. Without a query vector, full text alone."""
    started = time.perf_counter()
    where = _where(tenant_id, namespace_id, filters)
    # row_number(): ties broken by arrival in each channel, as trace search has always ranked.
    fused = await fused_candidates(
        s,
        Trace,
        where,
        query=query,
        query_vector=query_vector,
        model_id=model_id,
        candidates=candidates,
        rank=func.row_number,
        # memvault_word_match reads memories; traces have their own (smaller) table.
        word_index=False,
    )
    rrf: ColumnElement[Any] = func.coalesce(1.0 / (RRF_K + fused.c.lexical_rank), 0.0)
    if query_vector is not None:
        rrf = rrf + func.coalesce(1.0 / (RRF_K + fused.c.dense_rank), 0.0)
        cosine_value = (1 - Trace.embedding.cosine_distance(query_vector)).label("cosine")
        channels = 2.0
    else:
        cosine_value = cast(literal(None), Float).label("cosine")
        channels = 1.0

    stmt = (
        select(Trace, rrf.label("rrf"), cosine_value, fused.c.dense_rank, fused.c.lexical_rank, fused.c.lex_score)
        .join(fused, (Trace.id == fused.c.id) & (Trace.tenant_id == tenant_id))
        .order_by(rrf.desc(), Trace.id)
        .limit(limit)
    )
    rows = (await s.execute(stmt)).all()
    # Rank 1 in every channel that ran scores 1.0, so scores read the same across requests.
    best_possible = channels / (RRF_K + 1)
    hits = [
        Hit(
            trace=t,
            score=round(float(r) / best_possible, 6),
            # A lexical hit embedded by another model has no comparable cosine: none beats a wrong one.
            semantic_relevance=None if c is None or t.embedding_model != model_id else round(float(c), 6),
            dense_rank=dr,
            lexical_rank=lr,
            lexical_score=None if ls is None else float(ls),
        )
        for t, r, c, dr, lr, ls in rows
    ]
    return SearchOutcome(
        hits=hits,
        matched_by={
            "dense": sum(1 for h in hits if h.dense_rank is not None),
            "lexical": sum(1 for h in hits if h.lexical_rank is not None),
        },
        timings_ms={"sql": round((time.perf_counter() - started) * 1000, 2)},
    )
