"""The usage_hourly table (migration 0024): added to by the meter's flush, read by the account."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.keys import repository as keys_repo
from memvault.members import repository as members_repo
from memvault.metering.tally import UNITS
from memvault.oauth import repository as oauth_repo
from memvault.plans import repository as plans_repo
from memvault.webhooks import repository as webhooks_repo

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


async def totals_since(
    session: AsyncSession, tenant_id: uuid.UUID, since: datetime, *, until: datetime | None = None
) -> dict[str, int]:
    row = (
        await session.execute(
            text(
                f"SELECT {', '.join(f'COALESCE(SUM({u}), 0)::bigint AS {u}' for u in UNITS)} "
                "FROM usage_hourly WHERE tenant_id = :tenant_id AND hour >= :since"
                + (" AND hour < :until" if until is not None else "")
            ),
            {"tenant_id": tenant_id, "since": since, "until": until},
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


async def held(session: AsyncSession, tenant_id: uuid.UUID) -> dict[str, int]:
    """What the tenant holds of each capped thing, counted by the very functions each quota's check
    uses (so the account view and a refusal never disagree): memories (history included),
    namespaces, live API keys (neither revoked nor expired), members (active ones and pending
    invitations, which hold their places), webhook endpoints."""
    return {
        "memories": await plans_repo.count_memories(session, tenant_id),
        "namespaces": await plans_repo.count_namespaces(session, tenant_id),
        "api_keys": await keys_repo.count_live(session, tenant_id),
        "members": await oauth_repo.count_active_users(session, tenant_id)
        + await members_repo.count_pending(session, tenant_id),
        "webhooks": await webhooks_repo.count(session, tenant_id, lock=False),
    }
