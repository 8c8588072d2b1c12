"""The session neighbours a search shows around its hits (``SearchIn.neighbours``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    DateTime,
    Float,
    Integer,
    Text,
    bindparam,
    func,
    select,
    true,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import UUID as PG_UUID
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from memvault.memories import reads_repository as memory_reads
from memvault.memories.models import Memory
from memvault.memories.schemas import MemoryFilters, occurred
from memvault.retrieval.sql.common import by_key, first_passing


async def neighbours_of(
    s: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    filters: MemoryFilters | None,
    memories: list[Memory],
    n: int,
    gap_minutes: float = 0.0,
) -> dict[uuid.UUID, list[Memory]]:
    """Up to ``n`` memories before and after each memory in its session, in session order (valid
    time, then insertion order), under the same visibility rules as the search itself. With
    ``gap_minutes``, an event without a session id has its inferred conversation's
    (sql/inferred.py): each step no more than the gap from the last."""
    where = memory_reads.read_conditions(tenant_id, namespace_id, filters)
    out: dict[uuid.UUID, list[Memory]] = {m.id: [] for m in memories}
    in_sessions = [m for m in memories if m.session_id is not None]
    if in_sessions:
        for anchor, memory in await _around(s, tenant_id, where, in_sessions, n, SESSION):
            out[anchor].append(memory)
    if gap_minutes > 0:
        gap = timedelta(minutes=gap_minutes)
        inferred = [m for m in memories if m.session_id is None and m.namespace_id is not None and m.type == "event"]
        if inferred:
            by_anchor: dict[uuid.UUID, list[Memory]] = {}
            for anchor, memory in await _around(s, tenant_id, where, inferred, n, INFERRED, span=gap * n):
                by_anchor.setdefault(anchor, []).append(memory)
            for m in inferred:
                out[m.id] = _chained(m, by_anchor.get(m.id, []), gap)
    return out


# Each anchor's columns a conversation's read needs, beside its id and place: how to read them off
# a memory and their SQL type.
_COLUMNS: dict[str, tuple[Callable[[Memory], Any], Any]] = {
    "session_id": (lambda m: m.session_id, Text),
    "namespace_id": (lambda m: m.namespace_id, PG_UUID(as_uuid=True)),
    "scope": (lambda m: m.scope, Text),
    "user_key": (lambda m: m.user_id or "", Text),
    "agent_key": (lambda m: m.agent_id or "", Text),
}


def _anchors(memories: list[Memory], names: tuple[str, ...]) -> Any:
    """``memories`` as a row source: each one's id, the columns ``names`` of its conversation, and
    its place in session order."""
    columns: dict[str, tuple[list[Any], Any]] = {"id": ([m.id for m in memories], PG_UUID(as_uuid=True))}
    for name in names:
        read, kind = _COLUMNS[name]
        columns[name] = ([read(m) for m in memories], kind)
    columns["at"] = ([occurred(m) for m in memories], DateTime(timezone=True))
    columns["seq"] = ([m.seq for m in memories], BigInteger)
    arrays = (bindparam(f"anchor_{name}", values, type_=ARRAY(kind)) for name, (values, kind) in columns.items())
    return func.unnest(*arrays).table_valued(*columns).render_derived(name="anchor")


@dataclass(frozen=True)
class _Conversation:
    """How a memory's conversation is read: the anchor's columns it needs, and the probe
    functions that find the nearest memories on each side of it along the conversation's index
    (given the anchor, the span and how many; migrations 0039 and 0033)."""

    columns: tuple[str, ...]
    probe: Callable[[Any, bool, Any, Any], Any]


def _session_probe(anchor: Any, before: bool, _span: Any, k: Any) -> Any:
    probe = func.memvault_session_before if before else func.memvault_session_after
    return probe(anchor.c.namespace_id, anchor.c.session_id, anchor.c.at, anchor.c.seq, k)


def _inferred_probe(anchor: Any, before: bool, span: Any, k: Any) -> Any:
    probe = func.memvault_alone_before if before else func.memvault_alone_after
    owner = (anchor.c.namespace_id, anchor.c.scope, anchor.c.user_key, anchor.c.agent_key)
    return probe(*owner, anchor.c.at, anchor.c.seq, span, k)


SESSION = _Conversation(("namespace_id", "session_id"), _session_probe)
INFERRED = _Conversation(("namespace_id", "scope", "user_key", "agent_key"), _inferred_probe)
# How many more than asked each side probes: room for the nearest ones the read's conditions
# leave out (superseded, archived, filtered, shadowed), as the context channel's STEPS.
SPARE = 4


async def _around(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    where: list[Any],
    memories: list[Memory],
    n: int,
    conversation: _Conversation,
    span: timedelta | None = None,
) -> list[tuple[uuid.UUID, Memory]]:
    """Up to ``n`` memories on each side of each of ``memories`` in its ``conversation`` (within
    ``span`` of it, for an inferred one), as (that memory's id, a neighbour) in session order, in
    one statement. One round trip, where a read per side and memory took 20 of them (25-50 ms for
    ten hits at 100,000 memories, docs/benchmarks.md); each side one probe along the
    conversation's index, where a read as the app's role went through the whole session (or the
    owner's session-less events) for each."""
    anchor = _anchors(memories, conversation.columns)
    mine = [*where, Memory.tenant_id == tenant_id]
    within = bindparam("span_s", span.total_seconds() if span else None, type_=Float)
    probed = bindparam("probed", n + SPARE, type_=Integer)

    def side(before: bool) -> Any:
        found = conversation.probe(anchor, before, within, probed).table_valued("tenant_id", "id", name="found")
        near = first_passing(found, mine, before=before, limit=bindparam("per_side", n), name="near_row")
        near = near.lateral("near")
        return select(anchor.c.id.label("anchor"), near.c.tenant_id, near.c.id).select_from(anchor).join(near, true())

    pairs = union_all(side(True), side(False)).subquery("pairs")
    # Each neighbour's row by its key too: joined plainly on the search's tenant (a constant),
    # statistics that price the tenant at a few rows made the join read the tenant whole, or worse.
    # The tenant stays a condition of the lookup, as in the probes' (Citus routes by it).
    row = by_key(pairs.c.tenant_id, pairs.c.id, [Memory], [Memory.tenant_id == tenant_id], "neighbour")
    rows = await s.execute(select(pairs.c.anchor, aliased(Memory, row)).select_from(pairs).join(row, true()))
    return sorted(((a, memory) for a, memory in rows), key=lambda r: _place(r[1]))


def _place(m: Memory) -> tuple[datetime, int]:
    """A memory's place in session order (sql/common.session_order, in Python)."""
    return occurred(m), m.seq


def _chained(m: Memory, near: Sequence[Memory], gap: timedelta) -> list[Memory]:
    """``near`` (in session order, both sides of ``m``) cut on each side at the first step longer
    than ``gap``."""
    here = _place(m)
    before = [x for x in near if _place(x) < here]
    after = [x for x in near if _place(x) > here]
    return [*reversed(_step(m, before[::-1], gap)), *_step(m, after, gap)]


def _step(m: Memory, side: Sequence[Memory], gap: timedelta) -> list[Memory]:
    """``side`` (nearest first) up to the first step longer than ``gap``."""
    kept, last = [], occurred(m)
    for x in side:
        at = occurred(x)
        if abs(at - last) > gap:
            break
        kept.append(x)
        last = at
    return kept
