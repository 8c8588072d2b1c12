"""The metering gate and the buffer behind it: every operation counted in memory, written to
usage_hourly every ``interval_s`` seconds, never on the request path.

Like the access counts (memories/access.py): one writer task per event loop adds the buffered
counts to their hourly buckets, one transaction per tenant, and ``aclose`` writes what is left.
A crash loses at most one interval's counts. Every row is an upsert that adds, so two replicas
(or a flush retried after a failure) add to the same buckets without coordinating.

Monthly use (events and embedded tokens, for the plan's monthly caps) is the flushed total of the
month, read at most every ``month_ttl_s`` per tenant, plus what this process has counted and not
yet written, so a cap is checked with no query per request. Another replica's unwritten counts
are seen once it writes them: a cap may be passed by at most an interval's work of the others.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from types import ModuleType

from sqlalchemy.exc import IntegrityError

from memvault.db.deferred import DeferredWriter
from memvault.db.session import Database, TenantTx
from memvault.metering import repository as repo
from memvault.metering.tally import UNITS, Door, Tally, current_door, tallying
from memvault.operations import Operation
from memvault.plans.book import PlanBook
from memvault.plans.limits import month_bounds
from memvault.plans.quotas import MonthlyQuotaExceeded, require_monthly_room
from memvault.plans.repository import hold_quota
from memvault.principal import Principal
from memvault.webhooks import outbox

log = logging.getLogger(__name__)

# Seconds between two writes of the buffered counts: what a crash may lose, and how late the
# account's usage series may be.
WRITE_INTERVAL_S = 2.0

FOREIGN_KEY_VIOLATION = "23503"

# (tenant, hour, door, namespace, key, operation)
Bucket = tuple[uuid.UUID, datetime, str, str, str, str]
# The unit each monthly quota counts.
_MONTHLY = {"events_per_month": "events_ingested", "embedded_tokens_per_month": "tokens_embedded"}


def key_of(p: Principal, door: Door) -> str:
    """Who a bucket's use is billed to: the API key's id, else the subject (`user:<id>` for an
    OAuth sign-in); internal work (jobs) is billed to no key."""
    if p.key_id is not None:
        return str(p.key_id)
    return "" if door == "internal" else p.subject


def metrics() -> ModuleType:
    """The metrics module, imported on first use, not with this one: the facade imports this module,
    and `memvault serve`'s parent imports the facade before it has set up the metrics' multiprocess
    folder (serving.py); metrics made before that would be written where no scrape reads them."""
    from memvault.observability import metrics as module

    return module


class UsageMeter(DeferredWriter):
    _task_name = "memvault-usage-meter"

    def __init__(
        self,
        db: Database,
        plans: PlanBook,
        *,
        interval_s: float = WRITE_INTERVAL_S,
        month_ttl_s: float = 10.0,
        max_pending: int = 100_000,
    ) -> None:
        self._db = db
        self._plans = plans
        super().__init__(interval_s=interval_s)
        self._month_ttl_s = month_ttl_s
        self._max_pending = max_pending
        self._pending: dict[Bucket, list[int]] = {}
        # Counted and not yet committed, per (tenant, month start): what monthly use adds to the table.
        self._unwritten: dict[tuple[uuid.UUID, datetime], list[int]] = {}
        # The table's month totals as last read: (monotonic time read, month start, totals).
        self._written: dict[uuid.UUID, tuple[float, datetime, list[int]]] = {}

    # ---- counting -----------------------------------------------------------------------------

    @asynccontextmanager
    async def admit(self, p: Principal, op: Operation) -> AsyncIterator[None]:
        """The Gate (operations.py): counted when the call ends, failed or not."""
        # The plan is the metrics' label; PlanBook holds it, so this is no query per call.
        plan = (await self._plans.of(p.tenant_id)).name
        tally = Tally()
        try:
            with tallying(tally):
                yield
        finally:
            self.record(p, op, current_door(), tally, plan=plan)

    def record(self, p: Principal, op: Operation, door: Door, tally: Tally, *, plan: str) -> None:
        billed = door != "internal"
        units = [
            int(billed),
            tally.memories_written,
            int(billed and op.kind == "search"),
            tally.events_ingested,
            tally.tokens_embedded,
            tally.bytes_stored,
        ]
        if not any(units):
            return
        now = datetime.now(UTC)
        hour = now.replace(minute=0, second=0, microsecond=0)
        bucket = (p.tenant_id, hour, door, tally.namespace or "", key_of(p, door), op.name)
        self._add(bucket, units)
        metrics().observe_usage(plan, door, units)
        self._wake()

    def _add(self, bucket: Bucket, units: list[int], *, unwritten: bool = True) -> None:
        held = self._pending.get(bucket)
        if held is None:
            self._pending[bucket] = list(units)
        else:
            for i, n in enumerate(units):
                held[i] += n
        if unwritten:
            month = month_bounds(bucket[1])[0]
            pending = self._unwritten.setdefault((bucket[0], month), [0] * len(UNITS))
            for i, n in enumerate(units):
                pending[i] += n

    @property
    def pending(self) -> int:
        return len(self._pending)

    # ---- monthly use --------------------------------------------------------------------------

    async def require_monthly_room(self, tenant_id: uuid.UUID, quota: str, *, adding: int = 1) -> None:
        """Refuse work that would take a monthly counter past the plan's cap (429 quota_exceeded,
        Retry-After to the month's end); a plan without the cap costs no lookup at all."""
        plan = await self._plans.of(tenant_id)
        if getattr(plan.limits, quota) is None:
            return
        used = await self.month_used(tenant_id, quota)
        try:
            require_monthly_room(plan.limits, quota, used=used, adding=adding)
        except MonthlyQuotaExceeded:
            metrics().observe_quota_refusal(plan.name, quota)
            raise

    async def month_used(self, tenant_id: uuid.UUID, quota: str) -> int:
        """This month's use of a monthly quota (``events_per_month``, ``embedded_tokens_per_month``)."""
        return (await self.month_totals(tenant_id))[_MONTHLY[quota]]

    async def month_totals(self, tenant_id: uuid.UUID) -> dict[str, int]:
        month, _ = month_bounds()
        held = self._written.get(tenant_id)
        if held is None or held[1] != month or time.monotonic() - held[0] >= self._month_ttl_s:
            async with self._db.tenant_tx(tenant_id) as tx:
                totals = await repo.totals_since(tx.session, tenant_id, month)
            held = (time.monotonic(), month, [totals[u] for u in UNITS])
            self._written[tenant_id] = held
        unwritten = self._unwritten.get((tenant_id, month), [0] * len(UNITS))
        return {u: held[2][i] + unwritten[i] for i, u in enumerate(UNITS)}

    # ---- writing ------------------------------------------------------------------------------

    async def _announce_month(self, tx: TenantTx, tenant_id: uuid.UUID, items: list[tuple[Bucket, list[int]]]) -> None:
        """Queue the `quota.warning` of each monthly cap that this write of the counts crosses, in
        the write's own transaction: the counts become the month's total here, once, whichever
        replica counted them. Each capped quota's lock makes concurrent writers count in turn."""
        plan = await self._plans.of(tenant_id)
        capped = [(q, u) for q, u in _MONTHLY.items() if getattr(plan.limits, q) is not None]
        if not capped:
            return
        month, _ = month_bounds()
        adding = {u: sum(units[UNITS.index(u)] for b, units in items if b[1] >= month) for _, u in capped}
        capped = [(q, u) for q, u in capped if adding[u] > 0]
        if not capped:
            return
        for quota, _ in capped:
            await hold_quota(tx.session, tenant_id, quota)
        used = await repo.totals_since(tx.session, tenant_id, month)
        events = [
            warning
            for quota, unit in capped
            for warning in outbox.quota_warnings(
                quota, limit=getattr(plan.limits, quota), used=used[unit], adding=adding[unit]
            )
        ]
        await outbox.emit_many(tx, tenant_id, events)

    async def flush(self) -> None:
        """Add every pending count to its bucket now, one transaction per tenant."""
        batch, self._pending = self._pending, {}
        by_tenant: dict[uuid.UUID, list[tuple[Bucket, list[int]]]] = {}
        for bucket, units in sorted(batch.items()):
            by_tenant.setdefault(bucket[0], []).append((bucket, units))
        for tenant_id, items in by_tenant.items():
            rows = [
                {
                    "tenant_id": b[0],
                    "hour": b[1],
                    "door": b[2],
                    "namespace": b[3],
                    "key": b[4],
                    "operation": b[5],
                    **dict(zip(UNITS, units, strict=True)),
                }
                for b, units in items
            ]
            try:
                async with self._db.tenant_tx(tenant_id) as tx:
                    await self._announce_month(tx, tenant_id, items)
                    await repo.add(tx.session, rows)
            except Exception as exc:
                if isinstance(exc, IntegrityError) and getattr(exc.orig, "sqlstate", None) == FOREIGN_KEY_VIOLATION:
                    # The tenant was deleted since these calls (operator.delete_tenant): nobody to
                    # bill, and no later write would succeed either.
                    log.info("usage of deleted tenant %s dropped (%d buckets)", tenant_id, len(items))
                    self._written_now(items, committed=False)
                    continue
                if self.pending + len(items) <= self._max_pending:
                    log.warning("could not write %d usage buckets; kept for the next write", len(items), exc_info=True)
                    for bucket, units in items:
                        self._add(bucket, units, unwritten=False)
                    continue
                log.exception("could not write %d usage buckets; dropped", len(items))
                self._written_now(items, committed=False)
                continue
            self._written_now(items, committed=True)

    def _written_now(self, items: list[tuple[Bucket, list[int]]], *, committed: bool) -> None:
        """Move committed counts from the unwritten tally to the month totals held (dropped ones
        only leave the unwritten tally)."""
        for bucket, units in items:
            month = month_bounds(bucket[1])[0]
            pending = self._unwritten.get((bucket[0], month))
            if pending is not None:
                for i, n in enumerate(units):
                    pending[i] -= n
                if not any(pending):
                    del self._unwritten[(bucket[0], month)]
            held = self._written.get(bucket[0])
            if committed and held is not None and held[1] == month:
                for i, n in enumerate(units):
                    held[2][i] += n
