"""Inferred conversations (issue 30): the neighbours of an event stored without a session id.

Many clients store a conversation's turns as plain text, with no ``session_id``. Their turns
still form a conversation: the same owner (scope, user, agent) writing one after another. A
session-less event's neighbours are therefore the session-less events of the same owner in the
same namespace just before and after it in session order (valid time, then insertion order), if
no more than the gap (``search_session_gap_minutes``, or the namespace's ``session_gap_minutes``)
lies between the two. Chained, that makes each run of an owner's turns with no longer pause than
the gap one inferred conversation; turns written in one batch share their ``created_at``
(without a ``valid_from``) and so are one.

Events only (``type: event``, what was said or happened, as turns are stored): facts,
preferences, decisions and the other kinds are statements that stand on their own however close
in time they were written, and an agent saving a list of them has not written a conversation; a
neighbour lending them its match would only add noise (and every search of them index probes).

Inferred when read, not stored on the write path: nothing to keep consistent when writers of one
owner race (two concurrent first turns would each have opened a stored group), when an import
brings older turns in between, when a memory's ``valid_from`` is corrected or deleted, or when a
namespace changes its gap. The price is an index (migration 0033) on session-less memories by
owner and session order, which makes each lookup one probe, as the session index does for
memories with a session id (the two cover disjoint rows).

Never across boundaries: the namespace, scope, user and agent must be equal (a member's private
memories and another member's are different owners), and the neighbour passes the search's own
read conditions."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Float, bindparam, func, literal_column, or_, select, true

from memvault.memories.models import Memory
from memvault.retrieval.sql.common import CONTEXT_PROBED, by_key, first_passing, session_order
from memvault.retrieval.sql.shape import Params

# Seconds: the longest pause between two turns of one inferred conversation.
GAP_S = bindparam("session_gap_s", type_=Float)
# How many of an owner's nearest session-less events one probe reads on each side, of which the
# first the search may read is the neighbour (others can be archived or superseded in between).
STEPS: Any = literal_column("8")


def owner_of(model: Any) -> tuple[Any, Any, Any]:
    """The owner an inferred conversation belongs to, as migration 0033's index spells it (a
    constant, not a parameter, so that the index expression matches)."""
    empty: Any = literal_column("''")
    return model.scope, func.coalesce(model.user_id, empty), func.coalesce(model.agent_id, empty)


def alone(model: Any) -> list[Any]:
    """What makes a memory part of an inferred conversation: an event with no session id, in a
    namespace. Spelled as migration 0033's index predicate (constants) so that the index serves."""
    return [model.session_id.is_(None), model.namespace_id.is_not(None), model.type == literal_column("'event'")]


def _probed(fused: Any) -> Any:
    """Each channel's best ``CONTEXT_PROBED`` candidates that are events without a session id, with
    their owner and place in session order."""
    order_at, order_seq = session_order(Memory)
    scope, user, agent = owner_of(Memory)
    placed = by_key(
        fused.c.tenant_id,
        fused.c.id,
        [
            scope.label("scope"),
            user.label("user_key"),
            agent.label("agent_key"),
            order_at.label("ord"),
            order_seq,
            Memory.session_id,
            Memory.namespace_id,
            Memory.type,
        ],
        # No conditions inside the lookup: given migration 0033's predicate there, the planner read
        # that partial index by tenant (hundreds of rows a candidate) instead of the primary key.
        [],
        "placed_alone",
    )
    return (
        select(fused.c.id, placed.c.scope, placed.c.user_key, placed.c.agent_key, placed.c.ord, placed.c.seq)
        .select_from(fused)
        .join(placed, true())
        .where(
            or_(fused.c.dense_rank <= CONTEXT_PROBED, fused.c.lexical_rank <= CONTEXT_PROBED),
            # Tenant- and system-scope memories belong to no namespace, hence to no conversation.
            *alone(placed.c),
        )
        .cte("alone")
    )


def _adjacent(base: Any, where: list[Any], *, before: bool) -> Any:
    """The memory just before (after) each probed candidate in its inferred conversation: the
    nearest ``STEPS`` of the same owner within the gap, found by migration 0033's function along
    its index, of which the first that passes the search's own conditions."""
    probe = func.memvault_alone_before if before else func.memvault_alone_after
    found = probe(
        Params.namespace_id, base.c.scope, base.c.user_key, base.c.agent_key, base.c.ord, base.c.seq, GAP_S, STEPS
    ).table_valued("tenant_id", "id", name="alone_found")
    step = first_passing(found, where, before=before, limit=1, name="alone_row").lateral("alone_step")
    return select(base.c.id.label("a"), step.c.tenant_id.label("b_tenant_id"), step.c.id.label("b")).select_from(
        base.join(step, true())
    )


def inferred_edges(fused: Any, where: list[Any]) -> list[Any]:
    """(a, b_tenant_id, b): session-less event ``a`` among the candidates and the memory just before
    or after it in its inferred conversation, for the best candidates of each channel."""
    base = _probed(fused)
    return [_adjacent(base, where, before=True), _adjacent(base, where, before=False)]
