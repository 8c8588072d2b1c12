"""The session neighbours a search shows around its hits (``SearchIn.neighbours``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import BigInteger, DateTime, Text, bindparam, func, select, true, tuple_, union_all
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import UUID as PG_UUID
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.memories import reads_repository as memory_reads
from memvault.memories.models import Memory
from memvault.memories.schemas import MemoryFilters
from memvault.retrieval.sql.common import session_order
from memvault.retrieval.sql.inferred import alone, owner_of


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
        for anchor, memory in await _in_sessions(s, tenant_id, where, in_sessions, n):
            out[anchor].append(memory)
    if gap_minutes > 0:
        gap = timedelta(minutes=gap_minutes)
        for m in memories:
            if m.session_id is None and m.namespace_id is not None and m.type == "event":
                out[m.id] = await _inferred(s, [*where, Memory.tenant_id == tenant_id], m, n, gap)
    return out


async def _in_sessions(
    s: AsyncSession, tenant_id: uuid.UUID, where: list[Any], memories: list[Memory], n: int
) -> list[tuple[uuid.UUID, Memory]]:
    """Up to ``n`` memories on each side of each of ``memories`` in its session, as (that memory's
    id, a neighbour) in session order, in one statement:
    a read of both sides for each memory by the session index. One round trip, where a read per
    side and memory took 20 of them (25-50 ms for ten hits at 100,000 memories, docs/benchmarks.md)."""
    order = session_order(Memory)
    anchors = (
        func.unnest(
            bindparam("anchor_ids", [m.id for m in memories], type_=ARRAY(PG_UUID(as_uuid=True))),
            bindparam("anchor_sessions", [m.session_id for m in memories], type_=ARRAY(Text)),
            bindparam("anchor_at", [_date(m) for m in memories], type_=ARRAY(DateTime(timezone=True))),
            bindparam("anchor_seq", [m.seq for m in memories], type_=ARRAY(BigInteger)),
        )
        .table_valued("id", "session_id", "at", "seq")
        .render_derived(name="anchor")
    )

    def side(before: bool) -> Any:
        place = (
            tuple_(*order) < tuple_(anchors.c.at, anchors.c.seq)
            if before
            else tuple_(*order) > tuple_(anchors.c.at, anchors.c.seq)
        )
        near = (
            select(Memory.id.label("id"))
            .where(*where, Memory.tenant_id == tenant_id, Memory.session_id == anchors.c.session_id, place)
            .order_by(*(c.desc() if before else c for c in order))
            .limit(bindparam("per_side", n))
            .lateral("near")
        )
        return select(anchors.c.id.label("anchor"), near.c.id).select_from(anchors).join(near, true())

    pairs = union_all(side(True), side(False)).subquery("pairs")
    rows = await s.execute(
        select(pairs.c.anchor, Memory).join(Memory, (Memory.tenant_id == tenant_id) & (Memory.id == pairs.c.id))
    )
    return sorted(((anchor, memory) for anchor, memory in rows), key=lambda r: (_date(r[1]), r[1].seq))


def _date(m: Memory) -> datetime:
    """A memory's place in time in its conversation (memories.reads_repository.date_of, in Python)."""
    return m.valid_from or m.created_at


async def _inferred(s: AsyncSession, where: list[Any], m: Memory, n: int, gap: timedelta) -> list[Memory]:
    """Up to ``n`` memories on each side of session-less event ``m`` in its inferred conversation:
    the same owner's session-less events, read side by side (at most ``n`` of them, within ``n``
    gaps) and cut at the first pause longer than the gap."""
    order = session_order(Memory)
    at = order[0]
    scope, user, agent = owner_of(Memory)
    mine = _date(m)
    same = [
        *where,
        Memory.namespace_id == m.namespace_id,
        *alone(Memory),
        scope == m.scope,
        user == (m.user_id or ""),
        agent == (m.agent_id or ""),
    ]
    key = tuple_(*order) < tuple_(mine, m.seq)
    before = (
        await s.scalars(
            select(Memory).where(*same, key, at >= mine - gap * n).order_by(*(c.desc() for c in order)).limit(n)
        )
    ).all()
    after = (
        await s.scalars(
            select(Memory)
            .where(*same, tuple_(*order) > tuple_(mine, m.seq), at <= mine + gap * n)
            .order_by(*order)
            .limit(n)
        )
    ).all()
    return [*reversed(_chained(mine, before, gap)), *_chained(mine, after, gap)]


def _chained(start: datetime, side: Sequence[Memory], gap: timedelta) -> list[Memory]:
    """``side`` (nearest first) up to the first step longer than ``gap``."""
    kept, last = [], start
    for x in side:
        at = _date(x)
        if abs(at - last) > gap:
            break
        kept.append(x)
        last = at
    return kept
