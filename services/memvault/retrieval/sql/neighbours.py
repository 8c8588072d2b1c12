"""The session neighbours a search shows around its hits (``SearchIn.neighbours``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, tuple_
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
    order = session_order(Memory)
    out: dict[uuid.UUID, list[Memory]] = {}
    for m in memories:
        key = (m.valid_from or m.created_at, m.seq)
        if m.session_id is not None:
            same = [*where, Memory.tenant_id == tenant_id, Memory.session_id == m.session_id]
        elif gap_minutes > 0 and m.namespace_id is not None and m.type == "event":
            gap = timedelta(minutes=gap_minutes)
            out[m.id] = await _inferred(s, [*where, Memory.tenant_id == tenant_id], m, n, gap)
            continue
        else:
            out[m.id] = []
            continue
        before = (
            await s.scalars(
                select(Memory).where(*same, tuple_(*order) < tuple_(*key)).order_by(*(c.desc() for c in order)).limit(n)
            )
        ).all()
        after = (
            await s.scalars(select(Memory).where(*same, tuple_(*order) > tuple_(*key)).order_by(*order).limit(n))
        ).all()
        out[m.id] = [*reversed(before), *after]
    return out


async def _inferred(s: AsyncSession, where: list[Any], m: Memory, n: int, gap: timedelta) -> list[Memory]:
    """Up to ``n`` memories on each side of session-less event ``m`` in its inferred conversation:
    the same owner's session-less events, read side by side (at most ``n`` of them, within ``n``
    gaps) and cut at the first pause longer than the gap."""
    order = session_order(Memory)
    at = order[0]
    scope, user, agent = owner_of(Memory)
    mine = m.valid_from or m.created_at
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
        at = x.valid_from or x.created_at
        if abs(at - last) > gap:
            break
        kept.append(x)
        last = at
    return kept
