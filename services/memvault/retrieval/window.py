"""The conversation around the best hit (issue 30): in a conversation the evidence of an answer is
often a few turns from the turn that matches the question best ("what did your sister bring?" is
answered by "a lemon cake" two turns on), so the fused hits of the best hit's conversation that
lie close to it in it are lifted a little.

Re-orders the fused hits only, never adds one: among the hits of the best hit's conversation,
taken in conversation order, each of the WIDTH nearest on either side gains ``weight`` x (1 - its
distance / (WIDTH + 1)) (``window`` in the fusion weights, 0.1 by default, on scores where
the best possible is 1), never past the
best hit, which stays first. The context channel lends a candidate its session neighbours' match;
this lends the best hit's place to its neighbours among the candidates.

A conversation is a session (the same ``session_id``), or, for events stored without one, an
inferred conversation (retrieval/sql/inferred.py): the same namespace, scope, user and agent, and
no longer apart in time than WIDTH + 1 times the session gap. Facts and the other kinds stand on
their own and are never lifted. Hits already passed the search's read conditions, so nothing is
read that the caller could not read.

Chosen on LoCoMo's first five conversations, read on the other five
(loadtests/quality/feedback_offline.py halves; docs/benchmarks.md).
"""

from __future__ import annotations

from memvault.retrieval.hits import Hit
from memvault.retrieval.timeline import date_of, place_of

# Fused rows the statement returns when the window applies: room below the page for the best
# hit's neighbours to rise from.
FETCH = 20
# Neighbours on either side of the best hit, counted among the hits of its conversation.
WIDTH = 5
# A lifted hit stays this much below the best hit.
_BELOW_BEST = 1e-6


def fetch(limit: int) -> int:
    return max(limit, FETCH)


def same_conversation(best: Hit, other: Hit, gap_s: float) -> bool:
    a, b = best.memory, other.memory
    if (a.tenant_id, a.namespace_id, a.scope, a.user_id, a.agent_id) != (
        b.tenant_id,
        b.namespace_id,
        b.scope,
        b.user_id,
        b.agent_id,
    ):
        return False
    if a.session_id is not None:
        return b.session_id == a.session_id
    if b.session_id is not None or a.type != "event" or b.type != "event" or gap_s <= 0:
        return False
    return abs((date_of(best) - date_of(other)).total_seconds()) <= gap_s * (WIDTH + 1)


def lift(hits: list[Hit], weight: float, gap_s: float) -> list[Hit]:
    """``hits`` (fused order, best first) with the best hit's conversation neighbours lifted; each
    lifted hit's ``channels["window"]`` says by how much."""
    if weight <= 0 or len(hits) < 2:
        return hits
    best = hits[0]
    conversation = sorted((h for h in hits if h is best or same_conversation(best, h, gap_s)), key=place_of)
    if len(conversation) < 2:
        return hits
    at = next(i for i, h in enumerate(conversation) if h is best)
    for i, h in enumerate(conversation):
        distance = abs(i - at)
        if 0 < distance <= WIDTH:
            gain = weight * (1 - distance / (WIDTH + 1))
            score = max(h.score, min(h.score + gain, best.score - _BELOW_BEST))
            h.channels["window"] = (None, round(score - h.score, 6))
            h.score = round(score, 6)
    # Stable: the best hit first, ties in fused order.
    return [best, *sorted(hits[1:], key=lambda h: -h.score)]
