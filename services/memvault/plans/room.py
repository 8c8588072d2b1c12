"""Room under a stored-thing cap, counted in the write's own transaction: the count and the check
(plans/quotas.py require_room) run only when the tenant's plan caps the quota, so an unlimited
tenant's write costs nothing more, and under the tenant's quota lock, so two concurrent writes
cannot both take the last room (the second waits for the first to commit, then counts again).

A write that takes room and crosses 80 % or 100 % of the cap queues a `quota.warning` webhook
event in the same transaction (take_room): announced once, by the write that crossed, and never
by one that rolled back."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession

from memvault.db.session import TenantTx
from memvault.plans import repository as repo
from memvault.plans.limits import PlanLimits
from memvault.plans.quotas import require_room
from memvault.webhooks import outbox

Stored = Literal["memories", "namespaces"]

_COUNTS: dict[Stored, Callable[[AsyncSession, uuid.UUID], Awaitable[int]]] = {
    "memories": repo.count_memories,
    "namespaces": repo.count_namespaces,
}


async def take_room(tx: TenantTx, limits: PlanLimits, quota: str, *, used: int, adding: int = 1) -> None:
    """Refuse ``adding`` more of a capped thing of which ``used`` exist (QuotaExceeded, 403);
    else queue the `quota.warning` of each threshold this write crosses. The caller counts
    ``used`` under its lock, in ``tx``, the write's own transaction."""
    require_room(limits, quota, used=used, adding=adding)
    limit: int | None = getattr(limits, quota)
    if limit is not None:
        await outbox.emit_many(tx, tx.tenant_id, outbox.quota_warnings(quota, limit=limit, used=used, adding=adding))


async def require_stored_room(
    tx: TenantTx, limits: PlanLimits, quota: Stored, *, adding: int, hold: bool = True
) -> int | None:
    """QuotaExceeded (403) when ``adding`` more would pass the cap. ``hold=False`` for an early
    look before costly work (embedding), which the write's own held check then makes sure of (and
    only that one announces a crossing). How many there were before this write, when the plan caps
    the quota (None: not counted)."""
    if getattr(limits, quota) is None or adding <= 0:
        return None
    s: AsyncSession = tx.session
    if not hold:
        used = await _COUNTS[quota](s, tx.tenant_id)
        require_room(limits, quota, used=used, adding=adding)
        return used
    await repo.hold_quota(s, tx.tenant_id, quota)
    used = await _COUNTS[quota](s, tx.tenant_id)
    await take_room(tx, limits, quota, used=used, adding=adding)
    return used
