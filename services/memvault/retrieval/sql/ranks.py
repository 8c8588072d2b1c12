"""Where each candidate stands in each channel, and each channel's value scaled to 0..1 over the
candidates: what rank fusion and weighted fusion add up, and what a hit's explanation shows.

The priors (recency, importance, access, strength) and the order cue rank only the retrieval
head (the best ``head`` candidates on retrieval alone), so they reorder what retrieval found
relevant instead of pulling an old or merely recent candidate up from far down the list. Window,
intent and graph matches count anywhere."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Float, Integer, case, cast, func, literal, select

from memvault.retrieval.sql.common import BUCKETS
from memvault.retrieval.sql.shape import Params, Shape

NO_RANK = cast(literal(None), Integer)
# The BM25 score below which the best word match among the candidates no longer counts as a whole
# match: one word said once, at average length, by about a third of the namespace's memories
# (idf 1). A word that nearly every memory says (the user's name in a namespace about one user,
# "User" opening every extracted fact) scores near 0 in BM25, but a share of the best made its
# match count in full, and the memories that say it differ only by length: the shortest won
# ("What pets does Sam have?" answered "Sam is vegetarian now" before either of Sam's dogs).
LEXICAL_FLOOR = 1.0


def match_rank(col: Any) -> Any:
    """Stronger matches first (a named entity before a related one); no match, no rank."""
    matched = col > 0
    return case((matched, func.dense_rank().over(partition_by=matched, order_by=col.desc())), else_=None)


def _nonzero(value: Any) -> Any:
    """``value``, or NULL for 0, as a double: a divisor. Untyped, nullif made SQLAlchemy cast the
    divisor to numeric for a true division, and PostgreSQL turned each row's double into numeric
    through its decimal text and back (3-5 % of a search's CPU in PostgreSQL, docs/benchmarks.md)."""
    return func.nullif(value, 0.0, type_=Float)


def _bucket(col: Any) -> Any:
    return func.round(col * BUCKETS).desc()


def _relative(col: Any, *, invert: bool = False) -> Any:
    # Cosine has no natural zero: min to max.
    lo, hi = func.min(col).over(), func.max(col).over()
    spread = _nonzero(hi - lo)
    scaled = ((hi - col) if invert else (col - lo)) / spread
    # All equal: every candidate gets the full value (nothing to tell them apart).
    return func.coalesce(case((col.is_(None), None), else_=func.coalesce(scaled, 1.0)), 0.0)


def _share_of_best(col: Any, floor: float | None = None) -> Any:
    # BM25, access and strength have a natural zero (no match, never recalled): a share of the
    # best, so the weakest match still counts for more than none; with ``floor``, a share of
    # whichever is greater, the best or the floor.
    best = func.max(col).over()
    return func.coalesce(col / _nonzero(best if floor is None else func.greatest(best, floor)), 0.0)


def ranked_candidates(shape: Shape, signals: Any) -> Any:
    """``ranked``: ``signals``' columns, each channel's rank (``<channel>_rank``) and the values
    weighted fusion scales (``<channel>_rel``)."""
    headed = select(
        signals.c,
        func.row_number().over(order_by=(signals.c.retrieval.desc(), signals.c.id)).label("head_pos"),
        # Strength is unbounded: bucket it relative to the strongest candidate.
        (signals.c.strength / _nonzero(func.max(signals.c.strength).over())).label("strength_unit"),
    ).subquery("headed")
    sg = headed.c
    in_head = sg.head_pos <= Params.head

    def head_rank(*order: Any) -> Any:
        return case((in_head, func.rank().over(partition_by=in_head, order_by=order)), else_=None)

    intent_rank = case((sg.intent == 1.0, 1), else_=None) if shape.intent else NO_RANK
    graph_rank = match_rank(sg.graph) if shape.graph else NO_RANK
    time_rank: Any
    if shape.time == "window":
        time_rank = case((sg.time == 1.0, 1), else_=None)
    elif shape.time == "newest":
        time_rank = head_rank(sg.time.desc())
    elif shape.time == "oldest":
        time_rank = head_rank(sg.time.asc())
    else:
        time_rank = NO_RANK
    # select() expands a column collection at run time; the stubs declare single columns only.
    return select(  # type: ignore[call-overload]
        sg,
        head_rank(_bucket(sg.recency)).label("recency_rank"),
        head_rank(_bucket(sg.importance)).label("importance_rank"),
        head_rank(_bucket(sg.access)).label("access_rank"),
        head_rank(_bucket(sg.strength_unit)).label("strength_rank"),
        intent_rank.label("intent_rank"),
        graph_rank.label("graph_rank"),
        time_rank.label("time_rank"),
        _relative(sg.cosine).label("dense_rel"),
        _share_of_best(sg.lex_score, LEXICAL_FLOOR if shape.bm25 else None).label("lexical_rel"),
        _share_of_best(sg.access).label("access_rel"),
        _share_of_best(sg.strength).label("strength_rel"),
        _relative(sg.time, invert=shape.time == "oldest").label("time_rel"),
    ).cte("ranked")
