"""The status page's global tables (migration 0027): health samples and latency histograms.

Neither holds anything of a tenant; both are read and written in an unscoped app-role session.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

_SAMPLE = text(
    """
    INSERT INTO health_samples (minute, state, degraded)
    VALUES (date_trunc('minute', CAST(:at AS timestamptz), 'UTC'), :state, :degraded)
    ON CONFLICT (minute) DO NOTHING
    """
)


async def add_sample(session: AsyncSession, at: datetime, state: str, degraded: Sequence[str]) -> bool:
    """One sample for ``at``'s minute; False when that minute has one already (a second scheduler,
    a retried tick: the first one stands)."""
    result = await session.execute(_SAMPLE, {"at": at, "state": state, "degraded": list(degraded)})
    return bool(getattr(result, "rowcount", 0))


async def prune_samples(session: AsyncSession, before: datetime) -> int:
    result = await session.execute(text("DELETE FROM health_samples WHERE minute < :before"), {"before": before})
    return int(getattr(result, "rowcount", 0))


async def days(session: AsyncSession, since: datetime) -> list[tuple[date, int, int, int]]:
    """(UTC day, samples, degraded samples, down samples) for each day since ``since`` that has any."""
    rows = await session.execute(
        text(
            """
            SELECT (minute AT TIME ZONE 'UTC')::date AS day, count(*),
                   count(*) FILTER (WHERE state = 'degraded'), count(*) FILTER (WHERE state = 'down')
            FROM health_samples WHERE minute >= :since GROUP BY day ORDER BY day
            """
        ),
        {"since": since},
    )
    return [(r[0], int(r[1]), int(r[2]), int(r[3])) for r in rows]


async def degraded_periods(
    session: AsyncSession, since: datetime, *, limit: int
) -> list[tuple[datetime, datetime, int, str, list[str]]]:
    """The runs of consecutive minutes whose sample was not operational, newest first, at most
    ``limit``: (first minute, last minute, samples, worst state, components not operational)."""
    rows = await session.execute(
        text(
            """
            WITH bad AS (
                SELECT minute, state, degraded,
                       minute - (row_number() OVER (ORDER BY minute)) * interval '1 minute' AS run
                FROM health_samples WHERE minute >= :since AND state <> 'operational'
            )
            SELECT min(minute), max(minute), count(DISTINCT minute),
                   CASE WHEN bool_or(state = 'down') THEN 'down' ELSE 'degraded' END,
                   coalesce(array_agg(DISTINCT c) FILTER (WHERE c IS NOT NULL), '{}')
            FROM bad LEFT JOIN LATERAL unnest(bad.degraded) AS c ON true
            GROUP BY run ORDER BY min(minute) DESC LIMIT :limit
            """
        ),
        {"since": since, "limit": limit},
    )
    return [(r[0], r[1], int(r[2]), r[3], sorted(r[4])) for r in rows]


_LATENCY = text(
    """
    INSERT INTO latency_minutes (minute, door, kind, bucket, calls)
    VALUES (:minute, :door, :kind, :bucket, :calls)
    ON CONFLICT ON CONSTRAINT pk_latency_minutes DO UPDATE SET calls = latency_minutes.calls + EXCLUDED.calls
    """
)


async def add_latencies(session: AsyncSession, rows: Sequence[dict[str, Any]]) -> None:
    """Add each row's calls to its bucket (rows in one order across processes: no deadlock)."""
    if rows:
        await session.execute(_LATENCY, list(rows))


async def latency_histograms(session: AsyncSession, since: datetime) -> dict[tuple[str, str], dict[int, int]]:
    """Calls per bucket since ``since``, by (door, kind)."""
    rows = await session.execute(
        text(
            "SELECT door, kind, bucket, sum(calls) FROM latency_minutes WHERE minute >= :since "
            "GROUP BY door, kind, bucket"
        ),
        {"since": since},
    )
    found: dict[tuple[str, str], dict[int, int]] = {}
    for door, kind, bucket, calls in rows:
        found.setdefault((door, kind), {})[int(bucket)] = int(calls)
    return found


async def prune_latencies(session: AsyncSession, before: datetime) -> int:
    result = await session.execute(text("DELETE FROM latency_minutes WHERE minute < :before"), {"before": before})
    return int(getattr(result, "rowcount", 0))
