"""Room under a stored-thing cap, counted in the write's own transaction: the count and the check
(plans/quotas.py require_room) run only when the tenant's plan caps the quota, so an unlimited
tenant's write costs nothing more, and under the tenant's quota lock, so two concurrent writes
cannot both take the last room (the second waits for the first to commit, then counts again)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession

from memvault.plans import repository as repo
from memvault.plans.limits import PlanLimits
from memvault.plans.quotas import require_room

Stored = Literal["memories", "namespaces"]

_COUNTS: dict[Stored, Callable[[AsyncSession, uuid.UUID], Awaitable[int]]] = {
    "memories": repo.count_memories,
    "namespaces": repo.count_namespaces,
}


async def require_stored_room(
    s: AsyncSession, tenant_id: uuid.UUID, limits: PlanLimits, quota: Stored, *, adding: int, hold: bool = True
) -> int | None:
    """QuotaExceeded (403) when ``adding`` more would pass the cap. ``hold=False`` for an early
    look before costly work (embedding), which the write's own held check then makes sure of.
    How many there were before this write, when the plan caps the quota (None: not counted)."""
    if getattr(limits, quota) is None or adding <= 0:
        return None
    if hold:
        await repo.hold_quota(s, tenant_id, quota)
    used = await _COUNTS[quota](s, tenant_id)
    require_room(limits, quota, used=used, adding=adding)
    return used
