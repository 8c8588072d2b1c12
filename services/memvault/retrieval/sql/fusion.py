"""Fusion: the context channel's value, every channel's rank and value side by side, one score
per candidate (weighted reciprocal rank, or the weighted mean of values scaled to 0..1), and the
best ``limit`` read whole with what explains them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Float, and_, cast, func, literal, select, union_all

from memvault.memories.models import Memory
from memvault.retrieval.schemas import CHANNELS
from memvault.retrieval.sql.common import RRF_K, routed
from memvault.retrieval.sql.ranks import NO_RANK, match_rank
from memvault.retrieval.sql.shape import Params, Shape
from memvault.retrieval.sql.timeline import hit_vector


@dataclass(frozen=True)
class Statement:
    stmt: Any
    rank_key: dict[str, str]  # channel -> the result column with its rank
    value_key: dict[str, str]  # channel -> the result column with its value


def neighbour_match(shape: Shape, ranked: Any, edges: Any) -> Any:
    """``near`` (id, context): for each candidate, how well its best session neighbour matches on
    retrieval's channels, weighted as they are."""
    weight = Params.weight
    rel = {"dense": ranked.c.dense_rel, "lexical": ranked.c.lexical_rel}
    own = sum((weight[name] * rel[name] for name in shape.own), cast(literal(0.0), Float)) / sum(
        (weight[name] for name in shape.own), cast(literal(0.0), Float)
    )
    pairs = union_all(
        select(edges.c.a.label("x"), edges.c.b.label("y")), select(edges.c.b.label("x"), edges.c.a.label("y"))
    ).subquery("pairs")
    return (
        select(pairs.c.x.label("id"), func.max(own).label("context"))
        .join(ranked, ranked.c.id == pairs.c.y)
        .group_by(pairs.c.x)
        .subquery("near")
    )


def _fused_score(shape: Shape, rank_col: dict[str, Any], unit_col: dict[str, Any]) -> Any:
    weight = Params.weight
    score: Any = cast(literal(0.0), Float)
    for name in shape.used:
        if shape.fusion == "weighted":
            score = score + weight[name] * func.coalesce(unit_col[name], 0.0)
        else:
            score = score + func.coalesce(weight[name] / (RRF_K + rank_col[name]), 0.0)
    return score


def fused_hits(shape: Shape, ranked: Any, edges: Any | None) -> Statement:
    """The statement's result: the best ``limit`` candidates by fused score, each with its memory
    and every channel's rank and value."""
    if edges is not None:
        near = neighbour_match(shape, ranked, edges)
        context_value = near.c.context
        outer = ranked.outerjoin(near, near.c.id == ranked.c.id)
    else:
        context_value = cast(literal(None), Float)
        outer = ranked
    rc = ranked.c
    rank_col = {name: rc[f"{name}_rank"] for name in CHANNELS if name != "context"}
    rank_col["context"] = match_rank(context_value) if edges is not None else NO_RANK
    value_col = {
        "dense": rc.cosine,
        "lexical": rc.lex_score,
        **{name: rc[name] for name in ("recency", "importance", "access", "strength", "intent", "graph", "time")},
        "context": context_value,
    }
    # Values already within 0..1 (recency, importance, intent, graph, a window match, context)
    # count as they are; unbounded ones are scaled over the candidates.
    unit_col = {
        "dense": rc.dense_rel,
        "lexical": rc.lexical_rel,
        "recency": rc.recency,
        "importance": rc.importance,
        "access": rc.access_rel,
        "strength": rc.strength_rel,
        "intent": rc.intent,
        "graph": rc.graph,
        "time": rc.time if shape.time == "window" else rc.time_rel,
        "context": context_value,
    }
    fused_score = _fused_score(shape, rank_col, unit_col)

    # The hits first, then their rows: only those are read whole.
    top = (
        select(
            *rc,
            fused_score.label("fused_score"),
            rank_col["context"].label("context_rank"),
            context_value.label("context_value"),
            func.count(context_value).over().label("n_near"),
        )
        .select_from(outer)
        # At equal scores a memory's own match goes first: under rank fusion a match and the
        # neighbour it lends its match to can each be first in one channel.
        .order_by(fused_score.desc(), rc.retrieval.desc(), rc.id)
        .limit(Params.limit)
        .subquery("top")
    )
    vectors = [hit_vector().label("hit_vector")] if shape.vectors else []
    stmt = (
        select(Memory, *top.c, *vectors)
        .select_from(top)
        .join(Memory, and_(Memory.tenant_id == top.c.tenant_id, Memory.id == top.c.id, *routed()))
        .order_by(top.c.fused_score.desc(), top.c.retrieval.desc(), top.c.id)
    )
    return Statement(
        stmt=stmt,
        rank_key={name: "context_rank" if name == "context" else rank_col[name].name for name in CHANNELS},
        value_key={name: "context_value" if name == "context" else value_col[name].name for name in CHANNELS},
    )
