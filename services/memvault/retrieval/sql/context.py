"""The context channel's pool: the fused candidates and the session neighbours of the best of
them, which join the candidates (a turn whose neighbour matches is likely part of the exchange
asked about; conversational evidence is spread over adjacent turns)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, literal_column, or_, select, true, union, union_all

from memvault.memories.models import Memory
from memvault.retrieval.sql.common import CONTEXT_PROBED, by_key, first_passing, passing, session_order
from memvault.retrieval.sql.inferred import inferred_edges
from memvault.retrieval.sql.shape import Params


def _probed(fused: Any) -> Any:
    """Each channel's best ``CONTEXT_PROBED`` candidates with their place in their session."""
    order_at, order_seq = session_order(Memory)
    placed = by_key(
        fused.c.tenant_id,
        fused.c.id,
        [Memory.session_id, order_at.label("ord"), order_seq.label("seq")],
        # Sessions are the tenant's own: the probes below look in the tenant's rows only.
        [Memory.session_id.is_not(None)],
        "placed",
    )
    return (
        select(fused.c.id, placed.c.session_id, placed.c.ord, placed.c.seq)
        .select_from(fused)
        .join(placed, true())
        .where(or_(fused.c.dense_rank <= CONTEXT_PROBED, fused.c.lexical_rank <= CONTEXT_PROBED))
        .cte("base")
    )


# How many of a session's nearest memories one probe reads on each side, of which the first the
# search may read is the neighbour. Fewer than an inferred conversation's (sql/inferred.py): a
# session's turns are rarely left out (superseded, archived or filtered), and each id probed is
# one more lookup by key.
SESSION_STEPS: Any = literal_column("3")


def _adjacent(base: Any, where: list[Any], *, before: bool) -> Any:
    """The memory just before (after) each probed candidate in its session: the nearest
    ``SESSION_STEPS`` of the session, found by migration 0039's function along the session index,
    of which the first that passes the search's own conditions."""
    probe = func.memvault_session_before if before else func.memvault_session_after
    found = probe(Params.namespace_id, base.c.session_id, base.c.ord, base.c.seq, SESSION_STEPS).table_valued(
        "tenant_id", "id", name="session_found"
    )
    step = first_passing(found, where, before=before, limit=1, name="step_row").lateral("step")
    return select(base.c.id.label("a"), step.c.tenant_id.label("b_tenant_id"), step.c.id.label("b")).select_from(
        base.join(step, true())
    )


def neighbour_edges(fused: Any, scan: list[Any], keep: Any, inferred: bool = False) -> Any:
    """``edges`` (a, b_tenant_id, b): candidate ``a`` and the memory just before or after it in
    its session, for the best candidates of each channel; with ``inferred``, in its inferred
    conversation for a candidate without a session id (sql/inferred.py). The probes test the read
    conditions' ``scan`` part; ``keep`` (narrowest scope wins) is tested once on the neighbours
    found, each read by key: a neighbour it drops leaves its candidate without that edge."""
    base = _probed(fused)
    alone = inferred_edges(fused, scan) if inferred else []
    found = union_all(_adjacent(base, scan, before=True), _adjacent(base, scan, before=False), *alone).subquery(
        "adjacent"
    )
    return passing(found, found.c.b_tenant_id, found.c.b, [keep], "adjacent_kept").cte("edges")


def candidate_pool(fused: Any, edges: Any | None) -> Any:
    """``pool`` (tenant_id, id, dense_rank, lexical_rank, lex_score): the fused candidates and,
    with ``edges``, the neighbours they bring in (no rank in either channel)."""
    if edges is not None:
        pool_ids = union(select(fused.c.tenant_id, fused.c.id), select(edges.c.b_tenant_id, edges.c.b)).cte("pool_ids")
    else:
        pool_ids = select(fused.c.tenant_id, fused.c.id).cte("pool_ids")
    return (
        select(pool_ids.c.tenant_id, pool_ids.c.id, fused.c.dense_rank, fused.c.lexical_rank, fused.c.lex_score)
        .outerjoin(fused, (fused.c.tenant_id == pool_ids.c.tenant_id) & (fused.c.id == pool_ids.c.id))
        .cte("pool")
    )
