"""Each candidate's signals, computed where its row is read (by its key): cosine, word score,
recency, importance, access, strength, intent, graph and time, beside its retrieval ranks."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Float, and_, any_, case, cast, func, literal, select, true, type_coerce

from memvault.entities.models import MemoryEntity
from memvault.memories import reads_repository as memory_reads
from memvault.memories.models import Memory
from memvault.retrieval.sql.common import RRF_K, by_key, decay, lexical_query, routed
from memvault.retrieval.sql.shape import Params, Shape
from memvault.retrieval.sql.words import word_scores


def _graph_value() -> Any:
    """1 for a memory linked to an entity the query names, 0.5 to one related to those, else 0."""
    link = (
        select(func.max(case((MemoryEntity.entity_id == any_(Params.named), 1.0), else_=0.5)))
        .where(
            MemoryEntity.tenant_id == Memory.tenant_id,
            MemoryEntity.memory_id == Memory.id,
            MemoryEntity.entity_id == any_(Params.linked),
            *routed(MemoryEntity),
        )
        .scalar_subquery()
    )
    return func.coalesce(link, 0.0)


def _time_value(shape: Shape, at: Any) -> Any:
    """A window cue: 1 inside the window, else 0. An order cue: the time itself, ranked later."""
    if shape.time == "window":
        return case((and_(at >= Params.window_start, at < Params.window_end), 1.0), else_=0.0)
    if shape.time is not None:
        return func.extract("epoch", at)
    return cast(literal(None), Float)


def own_signals(shape: Shape) -> list[Any]:
    """The signals of the memory row being read, labelled; ts_rank_cd's word score too when BM25
    does not score the candidates."""
    p = Params
    at = memory_reads.date_of(Memory)
    cosine = 1 - Memory.embedding.cosine_distance(p.query_vector) if shape.dense else cast(literal(None), Float)
    # In double precision: the columns are `real`, whose product of two tiny stored values underflows
    # (an error in PostgreSQL, which made every search touching such a memory a 500).
    importance = cast(Memory.importance, Float) * cast(Memory.confidence, Float)
    access = func.ln(1 + Memory.access_count) * func.coalesce(
        decay(func.extract("epoch", p.ref - Memory.last_accessed_at), p.half_life_s), 0.0
    )
    strength = memory_reads.strength_of(Memory, now=p.ref, half_life_days=p.strength_half_life_days)
    intent = case((Memory.type == p.intent, 1.0), else_=0.0) if shape.intent else cast(literal(None), Float)
    signals = [
        cosine.label("cosine"),
        decay(func.extract("epoch", p.ref - at), p.half_life_s).label("recency"),
        importance.label("importance"),
        access.label("access"),
        strength.label("strength"),
        intent.label("intent"),
        (_graph_value() if shape.graph else cast(literal(None), Float)).label("graph"),
        _time_value(shape, at).label("time"),
    ]
    if not shape.bm25:
        signals.append(
            func.nullif(func.ts_rank_cd(Memory.tsv, lexical_query(Params.query_text)), 0.0).label("lex_score")
        )
    return signals


def candidate_signals(shape: Shape, pool: Any) -> Any:
    """``signals``: a row per candidate of ``pool`` with its retrieval ranks, its own signals, the
    channels' candidate counts and its retrieval score (weighted reciprocal rank of dense and
    lexical alone)."""
    weight = Params.weight
    own = own_signals(shape)
    row = by_key(pool.c.tenant_id, pool.c.id, own, [], "candidate")
    if shape.bm25:
        # Every candidate's own word score: the word channel's candidates have theirs, those only
        # meaning or a neighbour brought in are scored here.
        unscored = select(func.array_agg(pool.c.id)).where(pool.c.lexical_rank.is_(None)).scalar_subquery()
        scored = word_scores(unscored, "word_scores")
        lex_score = func.nullif(func.coalesce(pool.c.lex_score, scored.c.score), 0.0).label("lex_score")
    else:
        lex_score = row.c.lex_score
    # The ranks as doubles (exact), not numeric: SQLAlchemy casts an integer divisor to numeric.
    retrieval = func.coalesce(weight["dense"] / type_coerce(RRF_K + pool.c.dense_rank, Float), 0.0) + func.coalesce(
        weight["lexical"] / type_coerce(RRF_K + pool.c.lexical_rank, Float), 0.0
    )
    signals = select(
        pool.c.id,
        # Whose row it is (the tenant's or a shared one): the hits are read again by full key.
        pool.c.tenant_id,
        pool.c.dense_rank,
        pool.c.lexical_rank,
        lex_score,
        *(row.c[c.name] for c in own if c.name != "lex_score"),
        func.count(pool.c.dense_rank).over().label("n_dense"),
        func.count(pool.c.lexical_rank).over().label("n_lexical"),
        (func.count().over() - func.count(func.coalesce(pool.c.dense_rank, pool.c.lexical_rank)).over()).label(
            "n_context"
        ),
        retrieval.label("retrieval"),
    ).select_from(pool)
    if shape.bm25:
        signals = signals.outerjoin(scored, scored.c.id == pool.c.id)
    return signals.join(row, true()).subquery("signals")
