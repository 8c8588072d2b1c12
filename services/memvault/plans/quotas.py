"""The one place a quota is checked: every door's write that adds to a capped thing (memories,
namespaces, keys, members) asks here, before it stores anything, so a refused request leaves
nothing behind. Monthly counters (events, embedded tokens) are checked, and taken, by the usage
meter (metering/meter.py), which counts them; their refusal is this module's MonthlyQuotaExceeded."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from memvault.errors import Forbidden, MemvaultError
from memvault.plans.limits import PlanLimits, month_bounds


class QuotaExceeded(Forbidden):
    """A cap on what a tenant holds: 403 until something is removed or the plan changes."""

    code = "quota_exceeded"
    title = "Quota exceeded"

    def __init__(self, quota: str, *, limit: int, used: int, adding: int = 1) -> None:
        super().__init__(
            f"The plan allows {limit} {quota.replace('_', ' ')}; {used} are in use, and this would add {adding}.",
            extra={"quota": quota, "limit": limit, "used": used},
        )


class MonthlyQuotaExceeded(MemvaultError):
    """A monthly counter at its cap: 429 with Retry-After until the month (UTC) ends."""

    status = 429
    code = "quota_exceeded"
    title = "Quota exceeded"

    def __init__(self, quota: str, *, limit: int, used: int, now: datetime | None = None) -> None:
        now = now or datetime.now(UTC)
        _, end = month_bounds(now)
        retry = max(1, math.ceil((end - now).total_seconds()))
        super().__init__(
            f"The plan allows {limit} {quota.replace('_', ' ')}; {used} are used this month.",
            extra={"quota": quota, "limit": limit, "used": used, "resets_at": end.isoformat()},
        )
        self.retry_after_s = retry


def require_room(limits: PlanLimits, quota: str, *, used: int, adding: int = 1) -> None:
    """Refuse adding ``adding`` to a capped thing of which ``used`` exist (QuotaExceeded)."""
    limit: int | None = getattr(limits, quota)
    if limit is not None and used + adding > limit:
        raise QuotaExceeded(quota, limit=limit, used=used, adding=adding)
