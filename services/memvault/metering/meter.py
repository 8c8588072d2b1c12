"""The metering gate and the buffer behind it: every operation counted in memory, written to
usage_hourly every ``interval_s`` seconds, never on the request path.

Like the access counts (memories/access.py): one writer task per event loop adds the buffered
counts to their hourly buckets, one transaction per tenant, and ``aclose`` writes what is left.
A crash loses at most one interval's counts. Every row is an upsert that adds, so two replicas
(or a flush retried after a failure) add to the same buckets without coordinating.

Monthly caps (events ingested, tokens embedded) are checked before the work, and a write takes
what it is about to add in the same step, so writers running at once cannot all pass a cap that
one more fits; when the call ends, what it used replaces what it took. With Redis configured the
month's use lives there, shared by every replica as it happens (metering/month.py); without it
the month's use is the table's total, read at most every ``month_ttl_s`` per tenant, plus what
this process has counted or taken and not yet written, and another replica's unwritten counts are
seen once it writes them (a cap may be passed by at most an interval's work of the others).
Either way a cap costs no query per request.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from redis.exceptions import RedisError
from sqlalchemy.exc import IntegrityError

from memvault.db.deferred import DeferredWriter
from memvault.db.session import Database, TenantTx
from memvault.metering import repository as repo
from memvault.metering.month import MONTHLY_UNITS, Difference, SharedMonth
from memvault.metering.tally import UNITS, Door, Tally, current_door, current_tally, tallying
from memvault.operations import Operation
from memvault.plans.book import PlanBook
from memvault.plans.limits import month_bounds
from memvault.plans.quotas import MonthlyQuotaExceeded
from memvault.plans.repository import hold_quota
from memvault.principal import Principal
from memvault.webhooks import outbox

log = logging.getLogger(__name__)

# Seconds between two writes of the buffered counts: what a crash may lose, and how late the
# account's usage series may be.
WRITE_INTERVAL_S = 2.0

FOREIGN_KEY_VIOLATION = "23503"
# Seconds between two warnings that the months' differences could not reach Redis.
WARN_EVERY_S = 30.0

# (tenant, hour, door, namespace, key, operation)
Bucket = tuple[uuid.UUID, datetime, str, str, str, str]
# Where the monthly caps' units (metering/month.py) stand among a bucket's units.
_MONTHLY_AT = [UNITS.index(u) for u in MONTHLY_UNITS]
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
        redis: Any = None,
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
        # The months' use shared by the replicas, and what calls used beyond what they took there,
        # per (tenant, month start), one number per MONTHLY_UNITS, not yet added to it.
        self._shared = SharedMonth(redis) if redis is not None else None
        self._differences: dict[tuple[uuid.UUID, datetime], list[int]] = {}
        self._adder: asyncio.Task[None] | None = None
        self._warned_at = -WARN_EVERY_S

    # ---- counting -----------------------------------------------------------------------------

    @asynccontextmanager
    async def admit(self, p: Principal, op: Operation) -> AsyncIterator[None]:
        """The Gate (operations.py): counted when the call ends, failed or not."""
        # The plan is the metrics' label; PlanBook holds it, so this is no query per call.
        plan = (await self._plans.of(p.tenant_id)).name
        tally = Tally()
        failed = False
        try:
            with tallying(tally):
                yield
        except BaseException:
            failed = True
            raise
        finally:
            self.record(p, op, current_door(), tally, plan=plan)
            if failed and tally.taken and self._shared is not None:
                # What a failed call took is free before its error goes out: a client retrying at
                # once must not find its own failure holding the cap. (A call that succeeded gives
                # back what its estimate took beyond its use a moment later, with the adder.)
                await self._differences_added()

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
        now = datetime.now(UTC)
        self._settle(p.tenant_id, month_bounds(now)[0], tally, units)
        if any(units):
            hour = now.replace(minute=0, second=0, microsecond=0)
            bucket = (p.tenant_id, hour, door, tally.namespace or "", key_of(p, door), op.name)
            self._add(bucket, units)
            metrics().observe_usage(plan, door, units)
        self._wake()

    def _settle(self, tenant_id: uuid.UUID, month: datetime, tally: Tally, units: list[int]) -> None:
        """Put what a call used of each monthly unit in the place of what it took: taken here, it
        leaves the unwritten tally (``_add`` puts the use there); taken in Redis, the difference is
        added there by the adder task (and so is the use of calls that took nothing)."""
        # Without Redis nothing is shared; with it, the call's use goes there, less what it took.
        differences = {} if self._shared is None else {month: [units[i] for i in _MONTHLY_AT]}
        for (taken_month, unit, shared), n in tally.taken.items():
            if shared:
                differences.setdefault(taken_month, [0] * len(MONTHLY_UNITS))[MONTHLY_UNITS.index(unit)] -= n
            else:
                self._add_unwritten(tenant_id, taken_month, [-n if u == unit else 0 for u in UNITS])
        for m, numbers in differences.items():
            if any(numbers):
                self._hold_difference(tenant_id, m, numbers)
        if self._differences:
            # Added at once, not with the table's write: what a failed call took is free again, and
            # another replica sees this use, within a round trip.
            loop = asyncio.get_running_loop()
            if self._adder is None or self._adder.done() or self._adder.get_loop() is not loop:
                self._adder = loop.create_task(self._keep_adding(), name="memvault-month-adder")

    def _hold_difference(self, tenant_id: uuid.UUID, month: datetime, numbers: list[int]) -> None:
        held = self._differences.setdefault((tenant_id, month), [0] * len(MONTHLY_UNITS))
        for i, n in enumerate(numbers):
            held[i] += n

    def _add(self, bucket: Bucket, units: list[int], *, unwritten: bool = True) -> None:
        held = self._pending.get(bucket)
        if held is None:
            self._pending[bucket] = list(units)
        else:
            for i, n in enumerate(units):
                held[i] += n
        if unwritten:
            self._add_unwritten(bucket[0], month_bounds(bucket[1])[0], units)

    def _add_unwritten(self, tenant_id: uuid.UUID, month: datetime, units: list[int]) -> None:
        pending = self._unwritten.setdefault((tenant_id, month), [0] * len(UNITS))
        for i, n in enumerate(units):
            pending[i] += n
        if not any(pending):
            del self._unwritten[(tenant_id, month)]

    @property
    def pending(self) -> int:
        return len(self._pending) + len(self._differences)

    # ---- monthly use --------------------------------------------------------------------------

    async def require_monthly_room(self, tenant_id: uuid.UUID, quota: str, *, adding: int = 1) -> None:
        """Refuse work that would take a monthly counter past the plan's cap (429 quota_exceeded,
        Retry-After to the month's end); inside a metered call, take ``adding`` at once, so the
        calls running beside this one see it. A plan without the cap costs no lookup at all."""
        plan = await self._plans.of(tenant_id)
        limit: int | None = getattr(plan.limits, quota)
        if limit is None:
            return
        unit = _MONTHLY[quota]
        month, _ = month_bounds()
        used = await self._take(tenant_id, month, unit, adding, limit, current_tally())
        if used is not None:
            metrics().observe_quota_refusal(plan.name, quota)
            raise MonthlyQuotaExceeded(quota, limit=limit, used=used)

    async def _take(
        self, tenant_id: uuid.UUID, month: datetime, unit: str, adding: int, limit: int, tally: Tally | None
    ) -> int | None:
        """None when ``adding`` fits (taken, if a call's tally is open), else the use that refuses it."""
        if self._shared is not None:
            try:
                try:
                    used = await self._shared.take(tenant_id, month, unit, adding, limit, hold=tally is not None)
                except LookupError:  # a new month, or a Redis that lost it: counted from the table first
                    await self.month_totals(tenant_id, fresh=True)
                    used = await self._shared.take(tenant_id, month, unit, adding, limit, hold=tally is not None)
            except (RedisError, LookupError, TimeoutError):
                # As the rate limits do: without Redis each process goes on with its own count.
                self._redis_away("monthly use of tenant %s not reachable in Redis; counting alone", tenant_id)
            else:
                if used is None and tally is not None:
                    tally.taken[(month, unit, True)] = tally.taken.get((month, unit, True), 0) + adding
                return used
        used = (await self._month_here(tenant_id))[unit]
        # No await from the count to the take: a call resumed after this one sees what it took.
        if used + adding > limit:
            return used
        if tally is not None:
            self._add_unwritten(tenant_id, month, [adding if u == unit else 0 for u in UNITS])
            tally.taken[(month, unit, False)] = tally.taken.get((month, unit, False), 0) + adding
        return None

    async def month_used(self, tenant_id: uuid.UUID, quota: str) -> int:
        """This month's use of a monthly quota (``events_per_month``, ``embedded_tokens_per_month``)."""
        return (await self.month_totals(tenant_id))[_MONTHLY[quota]]

    async def month_totals(self, tenant_id: uuid.UUID, *, fresh: bool = False) -> dict[str, int]:
        """This month's use of every unit; the monthly caps' units as the replicas share them."""
        totals = await self._month_here(tenant_id, fresh=fresh)
        if self._shared is not None:
            await self._differences_added()
            month, end = month_bounds()
            # The table's totals are in Redis already, unless Redis lost them: raised to them,
            # never lowered (this process's unwritten counts are not a floor: they may be on their
            # way there).
            held = self._written[tenant_id][2]
            try:
                live = await self._shared.raise_to(tenant_id, month, end, [held[i] for i in _MONTHLY_AT])
            except (RedisError, TimeoutError):
                self._redis_away("monthly use of tenant %s not reachable in Redis", tenant_id)
            else:
                totals.update(zip(MONTHLY_UNITS, live, strict=True))
        return totals

    async def _table_month(self, tenant_id: uuid.UUID, month: datetime) -> dict[str, int]:
        async with self._db.tenant_tx(tenant_id) as tx:
            return await repo.totals_since(tx.session, tenant_id, month, until=month_bounds(month)[1])

    async def _month_here(self, tenant_id: uuid.UUID, *, fresh: bool = False) -> dict[str, int]:
        """The table's totals this month (read at most every ``month_ttl_s``) plus what this process
        has counted or taken and not written."""
        month, _ = month_bounds()
        held = self._written.get(tenant_id)
        if fresh or held is None or held[1] != month or time.monotonic() - held[0] >= self._month_ttl_s:
            totals = await self._table_month(tenant_id, month)
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

    async def _write_pending(self) -> None:
        """Add what calls used beyond what they took to the shared months, then every pending
        count to its bucket, one transaction per tenant: Redis is never behind the table."""
        batch, self._pending = self._pending, {}
        # After taking the batch: every count in it has reached Redis before it reaches the table.
        await self._differences_added()
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

    async def _differences_added(self) -> None:
        """Wait until every difference this process holds is in Redis (or failed to get there)."""
        adder = self._adder
        if adder is not None and not adder.done() and adder.get_loop() is asyncio.get_running_loop():
            await asyncio.shield(adder)  # a cancelled reader must not cancel the adding
        await self._add_differences()

    async def _keep_adding(self) -> None:
        while self._differences and await self._add_differences():
            pass

    async def _add_differences(self) -> bool:
        """Add what calls used beyond what they took to the shared months, in one script; a month
        Redis does not hold is first filled from the table (which does not hold these yet: they
        reach Redis before the table). False when some could not be added (kept for later)."""
        if self._shared is None or not self._differences:
            return True
        differences, self._differences = self._differences, {}
        items = [(t, m, numbers) for (t, m), numbers in differences.items()]
        try:
            missing = await self._shared.add(items)
        except Exception:
            self._keep(items)
            return False
        try:
            for tenant_id, month, _ in missing:
                totals = await self._table_month(tenant_id, month)
                await self._shared.raise_to(
                    tenant_id, month, month_bounds(month)[1], [totals[u] for u in MONTHLY_UNITS]
                )
            await self._shared.add(missing)  # a month gone again in between: the table's raise mends it
        except Exception:
            self._keep(missing)
            return False
        return True

    def _keep(self, items: list[Difference]) -> None:
        """Keep differences Redis did not take for the next write, unless too many are held (the
        months may then be short of them until the table's totals raise them)."""
        dropped = len(self._differences) + len(items) > self._max_pending
        if not dropped:
            for tenant_id, month, numbers in items:
                self._hold_difference(tenant_id, month, numbers)
        what = "dropped" if dropped else "kept"
        self._redis_away("could not add %d monthly differences to Redis; %s", len(items), what)

    def _redis_away(self, message: str, *args: object) -> None:
        """Warn with the error being handled, once in a while rather than once a request while
        Redis is away."""
        if time.monotonic() - self._warned_at >= WARN_EVERY_S:
            self._warned_at = time.monotonic()
            log.warning(message, *args, exc_info=True)

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
