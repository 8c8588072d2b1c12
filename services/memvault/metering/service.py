"""UsageOps: the account's plan, its quotas with their use, and the usage series (REST, MCP, SDK).

A principal limited to some namespaces sees only its namespaces' usage, and no tenant-wide counts
(the quotas): what it is shown never tells it about namespaces it cannot reach.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memvault.errors import InvalidInput
from memvault.facade import FacadeBase
from memvault.metering import repository as repo
from memvault.metering.schemas import (
    AccountPlanOut,
    Granularity,
    GroupBy,
    PlanOut,
    QuotaOut,
    UsagePoint,
    UsageSeriesOut,
)
from memvault.metering.tally import UNITS
from memvault.operations import operation
from memvault.plans.limits import month_bounds
from memvault.principal import Principal

# The longest series one request returns: 31 days of hours, 400 days of days (a year's invoices).
MAX_RANGE = {"hour": timedelta(days=31), "day": timedelta(days=400)}
# Without `from`: the last day of hours, or the last 30 days.
DEFAULT_RANGE = {"hour": timedelta(days=1), "day": timedelta(days=30)}
CAPS = ("memories", "namespaces", "api_keys", "members", "webhooks")
MONTHLY = (("events_per_month", "events_ingested"), ("embedded_tokens_per_month", "tokens_embedded"))


def _utc(value: datetime, field: str) -> datetime:
    if value.tzinfo is None:
        raise InvalidInput(f"`{field}` needs a time zone (for example 2026-12-01T00:00:00Z).", extra={"field": field})
    return value.astimezone(UTC)


class UsageOps(FacadeBase):
    @operation("read")
    async def account_plan(self, p: Principal) -> AccountPlanOut:
        """The tenant's plan and limits, and each quota's use: stored memories, namespaces, API
        keys and members against their caps, events and embedded tokens this month against theirs."""
        p.require("read")
        plan = await self._plans.of(p.tenant_id)
        limits = plan.limits
        quotas: list[QuotaOut] = []
        if p.unrestricted:
            async with self._db.tenant_tx(p.tenant_id) as tx:
                held = await repo.held(tx.session, p.tenant_id)
            quotas = [QuotaOut(quota=q, used=held[q], limit=getattr(limits, q)) for q in CAPS]
            month = await self._usage.month_totals(p.tenant_id)
            _, end = month_bounds()
            quotas += [
                QuotaOut(quota=q, used=month[unit], limit=getattr(limits, q), resets_at=end) for q, unit in MONTHLY
            ]
        return AccountPlanOut(
            plan=PlanOut(name=plan.name, limits=limits.as_dict(), overrides=dict(plan.overrides)), quotas=quotas
        )

    @operation("read")
    async def account_usage(
        self,
        p: Principal,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        granularity: Granularity = "day",
        group_by: GroupBy | None = None,
    ) -> UsageSeriesOut:
        """What the tenant used per hour or day between ``start`` (inclusive) and ``end``
        (exclusive, default now), optionally per door, namespace, key or operation. Counts reach
        the series within a few seconds (metering/meter.py)."""
        p.require("read")
        if granularity not in MAX_RANGE:
            raise InvalidInput("`granularity` is hour or day.", extra={"field": "granularity"})
        if group_by not in (None, "door", "namespace", "key", "operation"):
            raise InvalidInput("`group_by` is door, namespace, key or operation.", extra={"field": "group_by"})
        end = _utc(end, "to") if end is not None else datetime.now(UTC)
        start = _utc(start, "from") if start is not None else end - DEFAULT_RANGE[granularity]
        # Whole hours: the buckets are hours, so a period is never half counted.
        start = start.replace(minute=0, second=0, microsecond=0)
        if start >= end:
            raise InvalidInput("`from` must be before `to`.", extra={"field": "from"})
        if end - start > MAX_RANGE[granularity]:
            days = MAX_RANGE[granularity].days
            raise InvalidInput(
                f"At most {days} days at `granularity={granularity}`; ask for several ranges.", extra={"field": "to"}
            )
        async with self._db.tenant_tx(p.tenant_id) as tx:
            rows = await repo.series(
                tx.session,
                p.tenant_id,
                start=start,
                end=end,
                granularity=granularity,
                group_by=group_by,
                namespaces=None if p.namespaces is None else sorted(p.namespaces),
            )
        points = [UsagePoint(period=r["period"], group=r["grp"], **{u: int(r[u]) for u in UNITS}) for r in rows]
        return UsageSeriesOut(start=start, end=end, granularity=granularity, group_by=group_by, points=points)
