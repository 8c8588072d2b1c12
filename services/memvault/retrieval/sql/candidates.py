"""The candidate stage: each channel's best rows, fused by id into one row per candidate.

The generic parts (``fused_candidates``) serve any table with ``id``, ``tsv``, ``embedding`` and
``embedding_model`` (trace search uses them); ``dense_candidates`` and ``lexical_candidates``
are the memory search's own, with BM25 in sql/words.py."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Float, Integer, cast, func, literal, literal_column, select, true, union_all
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.db.session import set_local
from memvault.memories.models import Memory
from memvault.retrieval.sql.common import lexical_query, passing
from memvault.retrieval.sql.settings import hnsw_settings
from memvault.retrieval.sql.shape import Params, Shape
from memvault.retrieval.sql.words import bm25_candidates


def dense_inner(
    model: Any, where: list[Any], query_vector: Any, model_id: Any, candidates: Any, *, keep: Any = None
) -> Any:
    """The ``candidates`` nearest rows passing ``where`` (tenant_id, id, dist). For memories, the
    rows in the HNSW graph by its index and the few kept out of it exactly (migration 0036); when
    the index part comes back short (the scan gave up: ``hnsw.max_scan_tuples``), the graph's rows
    exactly instead, as ``memvault_nearest_keyed`` does (migration 0037). ``keep``: a condition
    tested once on the nearest rows found (each read by key) rather than in each of the three
    scans; a row it drops leaves the channel a candidate short, as for ``memvault_nearest_keyed``."""
    dist = model.embedding.cosine_distance(query_vector)

    def nearest(*more: Any, order: Any = dist) -> Any:
        return (
            select(model.tenant_id, model.id, dist.label("dist"))
            .where(*where, *more, model.embedding_model == model_id, model.embedding.is_not(None))
            .order_by(order)
            .limit(candidates)
        )

    if model is not Memory:
        return nearest().subquery("dense_inner")
    graph = nearest(Memory.in_graph).cte("dense_graph")
    gave_up = select(func.count() < candidates).select_from(graph).scalar_subquery()
    parts = union_all(
        select(*graph.c).where(~gave_up),
        # "+ 0": an order the HNSW index cannot serve, so this part reads exactly (and only runs
        # when the index part came back short: a one-time filter).
        nearest(Memory.in_graph, gave_up, order=dist + literal_column("0")),
        nearest(~Memory.in_graph),
    ).subquery("dense_parts")
    best = select(*parts.c).order_by(parts.c.dist).limit(candidates)
    if keep is None:
        return best.subquery("dense_inner")
    found = best.subquery("dense_nearest")
    return passing(found, found.c.tenant_id, found.c.id, [keep], "dense_kept").subquery("dense_inner")


def ts_rank_inner(model: Any, where: list[Any], tsq: Any, candidates: Any, *, word_index: bool) -> Any:
    """Full-text candidates ranked by PostgreSQL's ts_rank_cd. The word match runs on the full-text
    index through memvault_word_match (migration 0008): under RLS the planner may not use that
    index for `tsv @@ query` directly."""
    score = func.ts_rank_cd(model.tsv, tsq)
    matched = select(func.memvault_word_match(tsq).table_valued("id").render_derived(name="word_match"))
    return (
        select(model.tenant_id, model.id, score.label("lex_score"))
        .where(*where, model.id.in_(matched) if word_index else true(), model.tsv.op("@@")(tsq))
        .order_by(score.desc())
        .limit(candidates)
        .subquery("lex_inner")
    )


def fuse(lex_inner: Any, dense_inner: Any | None, rank: Any) -> Any:
    """One row per candidate (``tenant_id``, ``id``) with its rank in each channel (``dense_rank``,
    ``lexical_rank``, ``lex_score``), as a subquery named ``fused``. ``rank`` is the window
    function ranking each channel: rank() keeps ties as ties, row_number() breaks them."""
    lex_ranked = select(
        lex_inner.c.tenant_id,
        lex_inner.c.id,
        cast(literal(None), Integer).label("dense_rank"),
        rank().over(order_by=lex_inner.c.lex_score.desc()).label("lexical_rank"),
        lex_inner.c.lex_score,
    )
    if dense_inner is None:
        return lex_ranked.subquery("fused")
    dense_ranked = select(
        dense_inner.c.tenant_id,
        dense_inner.c.id,
        rank().over(order_by=dense_inner.c.dist).label("dense_rank"),
        cast(literal(None), Integer).label("lexical_rank"),
        cast(literal(None), Float).label("lex_score"),
    )
    # UNION ALL + GROUP BY rather than a FULL JOIN: the fused id stays a plain column, so the
    # joins reach each row by primary key instead of filtering a scan.
    both = union_all(dense_ranked, lex_ranked).subquery("both")
    return (
        select(
            both.c.tenant_id,
            both.c.id,
            func.min(both.c.dense_rank).label("dense_rank"),
            func.min(both.c.lexical_rank).label("lexical_rank"),
            func.max(both.c.lex_score).label("lex_score"),
        )
        .group_by(both.c.tenant_id, both.c.id)
        .subquery("fused")
    )


async def fused_candidates(
    s: AsyncSession,
    model: Any,
    where: list[Any],
    *,
    query: str,
    query_vector: list[float] | None,
    model_id: str,
    candidates: int,
    rank: Any = func.rank,
    word_index: bool = True,
) -> Any:
    """The candidate stage for any table with ``id``, ``tsv``, ``embedding`` and
    ``embedding_model`` (trace search uses it): up to ``candidates`` full-text rows ranked by
    ts_rank_cd and (with a query vector) nearest-vector rows passing ``where``, fused by id (see
    ``fuse``). Sets the transaction's HNSW settings first."""
    await set_local(s, hnsw_settings(candidates))
    lex_inner = ts_rank_inner(model, where, lexical_query(query), candidates, word_index=word_index)
    dense = None if query_vector is None else dense_inner(model, where, query_vector, model_id, candidates)
    return fuse(lex_inner, dense, rank)


def lexical_candidates(shape: Shape, where: list[Any], visible: Any) -> Any:
    """The word channel's candidates, ``lex_inner`` (tenant_id, id, lex_score): BM25 where the
    query's term statistics are known, else ts_rank_cd."""
    if shape.bm25:
        return bm25_candidates(shape, where, visible)
    return ts_rank_inner(
        Memory, [*where, visible], lexical_query(Params.query_text), Params.candidates, word_index=True
    )


def dense_candidates(shape: Shape, scan: list[Any], keep: Any, visible: Any) -> Any | None:
    """The meaning channel's candidates, ``dense_inner`` (tenant_id, id, dist); None without a
    query vector. The read conditions come in two parts: ``scan``, tested by the scans, and
    ``keep`` (narrowest scope wins), tested once on the rows found."""
    if shape.nearest:
        # Only the read conditions beyond the scope chain and lifecycle (a narrower memory of the
        # same key) can drop one of these: rare, and then the channel has a candidate less.
        found = (
            func.memvault_nearest_keyed(Params.namespace_id, Params.query_vector, Params.model_id, Params.candidates)
            .table_valued("tenant_id", "id", "dist")
            .render_derived(name="nearest")
        )
        return passing(found, found.c.tenant_id, found.c.id, [*scan, keep], "nearest_row").subquery("dense_inner")
    if shape.dense:
        return dense_inner(Memory, [*scan, visible], Params.query_vector, Params.model_id, Params.candidates, keep=keep)
    return None
