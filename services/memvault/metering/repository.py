"""The usage_hourly table (migration 0024): added to by the meter's flush, read by the account."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.metering.tally import UNITS

GroupBy = Literal["door", "namespace", "key", "operation"]
Granularity = Literal["hour", "day"]

_ADD = text(
    f"""
    INSERT INTO usage_hourly (tenant_id, hour, door, namespace, key, operation, {", ".join(UNITS)})
    VALUES (:tenant_id, :hour, :door, :namespace, :key, :operation, {", ".join(":" + u for u in UNITS)})
    ON CONFLICT ON CONSTRAINT pk_usage_hourly DO UPDATE SET
    {", ".join(f"{u} = usage_hourly.{u} + EXCLUDED.{u}" for u in UNITS)}
    """
)


async def add(session: AsyncSession, rows: Sequence[dict[str, Any]]) -> None:
    """Add each row's counts to its bucket (rows in one order across processes: no deadlock)."""
    if rows:
        await session.execute(_ADD, list(rows))


async def totals_since(session: AsyncSession, tenant_id: uuid.UUID, since: datetime) -> dict[str, int]:
    row = (
        await session.execute(
            text(
                f"SELECT {', '.join(f'COALESCE(SUM({u}), 0)::bigint AS {u}' for u in UNITS)} "
                "FROM usage_hourly WHERE tenant_id = :tenant_id AND hour >= :since"
            ),
            {"tenant_id": tenant_id, "since": since},
        )
    ).one()
    return {u: int(getattr(row, u)) for u in UNITS}


async def series(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    *,
    start: datetime,
    end: datetime,
    granularity: Granularity,
    group_by: GroupBy | None,
    namespaces: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Summed units per period (and per ``group_by`` value), oldest first. ``granularity`` and
    ``group_by`` are checked against their Literal values by the caller: they become SQL words."""
    if granularity not in ("hour", "day") or group_by not in (None, "door", "namespace", "key", "operation"):
        raise ValueError("bad granularity or group_by")
    group = f", {group_by} AS grp" if group_by else ", NULL::text AS grp"
    # A namespace-limited reader: its namespaces' rows only (not the tenant-wide ones).
    only = " AND namespace = ANY(:namespaces)" if namespaces is not None else ""
    params: dict[str, Any] = {"tenant_id": tenant_id, "start": start, "end": end}
    if namespaces is not None:
        params["namespaces"] = namespaces
    rows = await session.execute(
        text(
            f"SELECT date_trunc('{granularity}', hour, 'UTC') AS period{group}, "
            f"{', '.join(f'SUM({u})::bigint AS {u}' for u in UNITS)} "
            f"FROM usage_hourly WHERE tenant_id = :tenant_id AND hour >= :start AND hour < :end{only} "
            "GROUP BY 1, 2 ORDER BY 1, 2"
        ),
        params,
    )
    return [dict(r._mapping) for r in rows]


_HELD = text(
    """
    SELECT
      (SELECT count(*) FROM memories WHERE tenant_id = :t) AS memories,
      (SELECT count(*) FROM namespaces WHERE tenant_id = :t) AS namespaces,
      (SELECT count(*) FROM api_keys WHERE tenant_id = :t AND revoked_at IS NULL) AS api_keys,
      (SELECT count(*) FROM oauth_users WHERE tenant_id = :t AND disabled_at IS NULL) AS members
    """
)


async def held(session: AsyncSession, tenant_id: uuid.UUID) -> dict[str, int]:
    """What the tenant holds of each capped thing: memories (every row it stores, history
    included, as the namespaces' counts show), namespaces, live API keys and active members."""
    row = (await session.execute(_HELD, {"t": tenant_id})).one()
    return {k: int(v) for k, v in row._mapping.items()}
