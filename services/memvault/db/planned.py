"""Kept plans apart by the tenant's size to PostgreSQL's planner.

psycopg prepares a statement at its fifth run on a connection (a search's at its first,
retrieval/sql/statement.py), and PostgreSQL then may keep one generic plan for it (an unfiltered
search always does, retrieval/sql/settings.py). The plan is priced for the tenant of the
transaction that made it: the planner reads the row-level security condition's tenant setting
while estimating. The statistics of ``memories.tenant_id`` single out the largest tenants (their
most common values) and price every other tenant alike. Made for a tenant with no memories (a new
sign-up's first search, the start-up warm-up), a search's plan took every tenant for one row, and a
100,000-memory tenant's searches on that connection read the whole tenant for each candidate's
session neighbours: 4-6 s instead of 20 ms (migration 0038, docs/benchmarks.md); its session
neighbours' read (``neighbours``) went from 30 ms to 1.5 s the same way.

So every statement of a tenant transaction is marked with the tenant's size as the planner sees
it, the power of ten of its estimated rows (no mark for a tenant priced as any other), and a plan
is kept per text: tenants the planner prices apart never share one. The sizes change only when
the table is analysed, and each is kept a minute."""

from __future__ import annotations

import math
import uuid
from contextvars import ContextVar
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.expiring import Expiring

# The size of the tenant whose transaction runs in this context (set by Database.tenant_tx).
_planned_size: ContextVar[int | None] = ContextVar("memvault_planned_size", default=None)


def mark(size: int | None) -> str:
    """The comment that starts a statement of a tenant of ``size`` ("" for none)."""
    return "" if size is None else f"/* tenant rows ~1e{size} */ "


def marked(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> tuple[str, Any]:
    """``before_cursor_execute`` (retval): the statement marked with its tenant's size."""
    size = _planned_size.get()
    return (statement if size is None else mark(size) + statement), parameters


def planning_for(size: int | None) -> Any:
    """Mark the context's statements with ``size``; returns the token to ``reset`` it with."""
    return _planned_size.set(size)


def done_planning(token: Any) -> None:
    _planned_size.reset(token)


class PlannedSizes:
    """Each tenant's size to the planner, kept ``ttl_s`` seconds, for at most ``tenants`` tenants."""

    def __init__(self, ttl_s: float = 60.0, tenants: int = 4096) -> None:
        self._sizes: Expiring[uuid.UUID, int | None] = Expiring(ttl_s, tenants)

    async def order_of(self, s: AsyncSession, tenant_id: uuid.UUID) -> int | None:
        """The power of ten of the rows the planner expects of the transaction's tenant
        (``tenant_id``), or None when the statistics price it as any tenant."""

        async def ask() -> int | None:
            rows = (await s.execute(select(func.memvault_tenant_rows_planned()))).scalar_one()
            return None if rows is None else int(math.log10(max(float(rows), 1.0)))

        return await self._sizes.value(tenant_id, ask)

    def forget(self) -> None:
        """Ask again at each tenant's next transaction (after an ``ANALYZE``)."""
        self._sizes.clear()
