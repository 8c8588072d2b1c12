"""The word channel by BM25, where the word indexes find the rows (migrations 0010, 0013): the
best matches of the scope chain come back scored, and only those are read again here, under RLS
and the read conditions."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, and_, cast, func, literal, select, true, union_all
from sqlalchemy.dialects.postgresql import ARRAY, TSQUERY

from memvault.memories.models import Memory
from memvault.retrieval.sql.common import by_key
from memvault.retrieval.sql.shape import Params, Shape


def lexemes() -> Any:
    """The query's words, as the tsqueries the word functions score by."""
    return cast(Params.lexemes, ARRAY(TSQUERY))


def word_scores(ids: Any, name: str) -> Any:
    """(id, score) of the memories ``ids`` (an array), scored on every query word as
    memvault_word_best scores."""
    return (
        func.memvault_word_scores(ids, lexemes(), Params.idf, Params.avg_len)
        .table_valued("id", "score")
        .render_derived(name=name)
    )


def _matched(shape: Shape, limit: Any, name: str) -> Any:
    """The namespace's best ``limit`` matches, scored. Live memories from the namespace's own word
    index (migration 0013); the rest, which that index leaves out, from the full-text index."""
    p = Params
    if shape.live:
        found = func.memvault_word_best_keyed(
            p.namespace_id, p.picking_words, p.words, lexemes(), p.idf, p.avg_len, limit
        )
    else:
        found = func.memvault_word_top_keyed(
            p.namespace_id, cast(p.picking, TSQUERY), lexemes(), p.idf, p.avg_len, False, limit
        )
    return found.table_valued("tenant_id", "id", "score").render_derived(name=name)


def _best(found: Any, where: list[Any]) -> Any:
    # The match's key is its own: its row is read only to check the read conditions.
    row = by_key(found.c.tenant_id, found.c.id, [Memory.id], where, f"{found.name}_row")
    return (
        select(found.c.tenant_id, found.c.id, found.c.score.label("lex_score"))
        .select_from(found)
        .join(row, true())
        .order_by(found.c.score.desc(), found.c.id)
        .limit(Params.candidates)
    )


def _best_scored(rows: Any, name: str) -> Any:
    # ``rows`` (tenant_id, id), each holding a picking word and passing the read conditions,
    # scored on every query word as memvault_word_best scores: the best first.
    scored = word_scores(select(func.array_agg(rows.c.id)).scalar_subquery(), name)
    return (
        select(rows.c.tenant_id, rows.c.id, scored.c.score.label("lex_score"))
        .join(scored, scored.c.id == rows.c.id)
        .order_by(scored.c.score.desc(), rows.c.id)
        .limit(Params.candidates)
    )


def _every_live_match(where: list[Any], visible: Any) -> Any:
    # Each match checked once against the read conditions, in a join planned with the filter's
    # values (by key for a broad filter, by hash against the rows a narrow one keeps); only those
    # that pass are scored, with the same scores memvault_word_best gives (migration 0017).
    found = (
        func.memvault_word_matches_keyed(Params.namespace_id, Params.picking_words)
        .table_valued("tenant_id", "id")
        .render_derived(name="word_all")
    )
    passing = (
        select(Memory.tenant_id, Memory.id)
        .join(found, and_(found.c.tenant_id == Memory.tenant_id, found.c.id == Memory.id))
        .where(*where, visible)
        .cte("passing")
    )
    return _best_scored(passing, "passing_scores")


def _the_readers_own(where: list[Any], visible: Any) -> Any:
    # A reader's small scope chain (retrieval/chain.py): its rows that pass and hold a picking
    # word, found through the owner indexes and scored on every query word, where the namespace's
    # best matches would be mostly other users'. Exact, like the second pass of bm25_candidates.
    holding = (
        select(Memory.tenant_id, Memory.id)
        .where(*where, visible, Memory.tsv.op("@@")(cast(Params.picking, TSQUERY)))
        .cte("own_matches")
    )
    return _best_scored(holding, "own_scores")


def bm25_candidates(shape: Shape, where: list[Any], visible: Any) -> Any:
    """``lex_inner`` (tenant_id, id, lex_score) by BM25."""
    if shape.own_words:
        return _the_readers_own(where, visible).subquery("lex_inner")
    # First the best `prefetch` matches. They hold the best candidates of every match unless the
    # read conditions (filters, a narrower memory of the same key) left fewer than asked of a
    # list that was cut short: only then are all matches read.
    prefetched = select(_matched(shape, Params.prefetch, "word_top")).cte("prefetched")
    first = _best(prefetched, where).cte("first")
    short = and_(
        select(func.count()).select_from(first).scalar_subquery() < Params.candidates,
        select(func.count()).select_from(prefetched).scalar_subquery() >= Params.prefetch,
    )
    every = (
        _every_live_match(where, visible)
        if shape.live
        else _best(_matched(shape, cast(literal(None), Integer), "word_all"), where)
    ).where(short)
    return union_all(select(first.c.tenant_id, first.c.id, first.c.lex_score).where(~short), every).subquery(
        "lex_inner"
    )
