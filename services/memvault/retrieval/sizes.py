"""How large PostgreSQL's planner takes a tenant to be, so that a kept plan serves only tenants it
prices alike.

An unfiltered search keeps one plan per connection and statement (sql/settings.py), priced for
the tenant of the transaction that made it: the row-level security condition's tenant setting is
read while planning. The statistics single out the largest tenants and price every other one
alike. Made for a tenant with no memories, the plan took every tenant for one row, and a large
tenant's search on that connection read its whole tenant for each candidate's session
neighbours: 4-6 s at 100,000 memories instead of 20 ms (migration 0038, docs/benchmarks.md).

So a search's statement is marked with its tenant's size as the planner sees it, to a power of
ten (none for a tenant priced as any other), and tenants of different marks keep different plans.
The sizes change only when the table is analysed: each is kept a minute."""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections import OrderedDict

from sqlalchemy.ext.asyncio import AsyncSession

from memvault.retrieval.sql.planned import tenant_rows_planned


class PlannedSizes:
    """Each tenant's size to the planner, kept ``ttl_s`` seconds, for at most ``tenants`` tenants."""

    def __init__(self, ttl_s: float = 60.0, tenants: int = 4096) -> None:
        self._ttl = ttl_s
        self._max = tenants
        self._sizes: OrderedDict[uuid.UUID, tuple[float, int | None]] = OrderedDict()
        self._lock = threading.Lock()

    async def order_of(self, s: AsyncSession, tenant_id: uuid.UUID) -> int | None:
        """The power of ten of the rows the planner expects of the transaction's tenant
        (``tenant_id``), or None when the statistics price it as any tenant."""
        now = time.monotonic()
        with self._lock:
            kept = self._sizes.get(tenant_id)
        if kept is not None and now - kept[0] < self._ttl:
            return kept[1]
        rows = await tenant_rows_planned(s)
        order = None if rows is None else int(math.log10(max(rows, 1.0)))
        with self._lock:
            self._sizes[tenant_id] = (now, order)
            self._sizes.move_to_end(tenant_id)
            while len(self._sizes) > self._max:
                self._sizes.popitem(last=False)
        return order

    def forget(self) -> None:
        """Ask again at each tenant's next search (after an ``ANALYZE``)."""
        with self._lock:
            self._sizes.clear()
