"""What the planner expects of the transaction's tenant (migration 0038, retrieval/sizes.py)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession


async def tenant_rows_planned(s: AsyncSession) -> float | None:
    """The memories the planner expects of the transaction's tenant; None when its statistics
    price the tenant as any other."""
    rows = (await s.execute(select(func.memvault_tenant_rows_planned()))).scalar_one()
    return None if rows is None else float(rows)
