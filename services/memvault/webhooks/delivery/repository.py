"""The sender's SQL: which deliveries are due (an owner sweep across tenants, through
operator.py), claiming them inside their tenant, and recording what each attempt did."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.db.base import app_now

# A tenant's oldest due rows take the first turns, every tenant's first row comes before any
# tenant's second (round-robin by `turn`), and no tenant lists more than it may start: one tenant
# with 10,000 rows due adds ``per_tenant`` rows to the list, not 10,000.
_DUE = text(
    """
    SELECT tenant_id, id FROM (
        SELECT d.tenant_id, d.id, d.next_attempt_at,
               row_number() OVER (PARTITION BY d.tenant_id ORDER BY d.next_attempt_at, d.id) AS turn
        FROM webhook_deliveries d
        JOIN webhook_endpoints e ON e.tenant_id = d.tenant_id AND e.id = d.endpoint_id
        WHERE d.status = 'pending' AND d.next_attempt_at <= now() AND e.enabled
    ) due
    WHERE turn <= :per_tenant
    ORDER BY turn, next_attempt_at
    LIMIT :limit
    """
)

# Claiming leases the row (next_attempt_at moves past the attempt's deadline) and counts the
# attempt, then commits: no transaction stays open while the receiver answers. A sender that dies
# mid-attempt leaves the row to come due again when the lease ends: at least once, never lost.
_CLAIM = text(
    """
    WITH claimed AS (
        SELECT d.tenant_id, d.id FROM webhook_deliveries d
        JOIN webhook_endpoints e ON e.tenant_id = d.tenant_id AND e.id = d.endpoint_id
        WHERE d.tenant_id = :tenant AND d.id = ANY(:ids) AND d.status = 'pending'
          AND d.next_attempt_at <= now() AND e.enabled
        ORDER BY d.next_attempt_at
        FOR UPDATE OF d SKIP LOCKED
    )
    UPDATE webhook_deliveries d
    SET attempts = d.attempts + 1, last_attempt_at = now(),
        next_attempt_at = now() + make_interval(secs => :lease_s)
    FROM claimed, webhook_endpoints e
    WHERE d.tenant_id = claimed.tenant_id AND d.id = claimed.id
      AND e.tenant_id = d.tenant_id AND e.id = d.endpoint_id
    RETURNING d.id, d.endpoint_id, d.message_id, d.payload, d.attempts, e.url, e.secret,
              CASE WHEN e.previous_secret_expires_at > now() THEN e.previous_secret END AS previous_secret
    """
).bindparams(bindparam("ids", type_=ARRAY(UUID(as_uuid=True))))

# Only the attempt that holds the lease records: a sender that outlived its lease (the row was
# claimed again meanwhile, so `attempts` moved on) writes nothing.
_RECORD = text(
    """
    UPDATE webhook_deliveries
    SET status = :status, next_attempt_at = now() + make_interval(secs => :delay_s),
        response_status = :response_status, response_excerpt = :excerpt, latency_ms = :latency_ms,
        error = :error
    WHERE tenant_id = :tenant AND id = :id AND attempts = :attempts AND status = 'pending'
    """
)

# The endpoint's run of failures: begun at its first failure, ended by a success; three days of it
# disable the endpoint (its pending rows stay pending, for enable or replay to resume). Now is a
# value (db.base.app_now): Citus refuses now() inside COALESCE and CASE in an UPDATE.
_FAILED = text(
    """
    UPDATE webhook_endpoints
    SET failing_since = COALESCE(failing_since, :now),
        enabled = enabled AND COALESCE(failing_since, :now) > :now - make_interval(secs => :disable_after_s),
        disabled_reason = CASE
            WHEN enabled AND COALESCE(failing_since, :now) <= :now - make_interval(secs => :disable_after_s)
            THEN 'failing' ELSE disabled_reason END,
        updated_at = now()
    WHERE tenant_id = :tenant AND id = :endpoint
    RETURNING enabled
    """
)
_SUCCEEDED = text(
    "UPDATE webhook_endpoints SET failing_since = NULL, updated_at = now() "
    "WHERE tenant_id = :tenant AND id = :endpoint AND failing_since IS NOT NULL"
)
_GONE = text(
    "UPDATE webhook_endpoints SET enabled = false, disabled_reason = 'gone', updated_at = now() "
    "WHERE tenant_id = :tenant AND id = :endpoint AND enabled"
)


@dataclass(frozen=True)
class Claimed:
    tenant_id: uuid.UUID
    id: uuid.UUID
    endpoint_id: uuid.UUID
    message_id: str
    payload: dict[str, Any]
    attempts: int
    url: str
    secrets: tuple[str, ...]


async def due(s: AsyncSession, *, per_tenant: int, limit: int) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """(tenant, delivery) due now across tenants, round-robin over tenants: an owner session only."""
    rows = await s.execute(_DUE, {"per_tenant": per_tenant, "limit": limit})
    return [(t, i) for t, i in rows.all()]


async def claim(s: AsyncSession, tenant_id: uuid.UUID, ids: list[uuid.UUID], *, lease_s: float) -> list[Claimed]:
    """Lease those of ``ids`` still due, whose endpoint is enabled, that no other sender holds."""
    rows = await s.execute(_CLAIM, {"tenant": tenant_id, "ids": ids, "lease_s": lease_s})
    return [
        Claimed(
            tenant_id=tenant_id,
            id=r.id,
            endpoint_id=r.endpoint_id,
            message_id=r.message_id,
            payload=r.payload,
            attempts=r.attempts,
            url=r.url,
            secrets=(r.secret, r.previous_secret) if r.previous_secret else (r.secret,),
        )
        for r in rows.all()
    ]


async def record(
    s: AsyncSession,
    d: Claimed,
    *,
    status: str,
    delay_s: float,
    response_status: int | None,
    excerpt: str | None,
    latency_ms: int | None,
    error: str | None,
) -> bool:
    """Write an attempt's outcome; False when this sender's lease was lost (nothing written)."""
    result = await s.execute(
        _RECORD,
        {
            "tenant": d.tenant_id,
            "id": d.id,
            "attempts": d.attempts,
            "status": status,
            "delay_s": delay_s,
            "response_status": response_status,
            "excerpt": excerpt,
            "latency_ms": latency_ms,
            "error": error,
        },
    )
    return bool(getattr(result, "rowcount", 0))


async def endpoint_succeeded(s: AsyncSession, tenant_id: uuid.UUID, endpoint_id: uuid.UUID) -> None:
    await s.execute(_SUCCEEDED, {"tenant": tenant_id, "endpoint": endpoint_id})


async def endpoint_failed(
    s: AsyncSession, tenant_id: uuid.UUID, endpoint_id: uuid.UUID, *, disable_after_s: float
) -> bool:
    """Count a failure against the endpoint; True when that disabled it (three days failing)."""
    row = (
        await s.execute(
            _FAILED,
            {"tenant": tenant_id, "endpoint": endpoint_id, "disable_after_s": disable_after_s, "now": app_now()},
        )
    ).first()
    return row is not None and not row.enabled


async def endpoint_gone(s: AsyncSession, tenant_id: uuid.UUID, endpoint_id: uuid.UUID) -> bool:
    """Disable the endpoint whose receiver answered 410; True when this disabled it."""
    result = await s.execute(_GONE, {"tenant": tenant_id, "endpoint": endpoint_id})
    return bool(getattr(result, "rowcount", 0))


CHANNEL = "memvault_webhooks"


async def notify(s: AsyncSession) -> None:
    """Wake the senders once this transaction commits (NOTIFY is delivered on commit, dropped on
    rollback): for the outbox's emit, so a delivery need not wait for the next sweep."""
    await s.execute(text("SELECT pg_notify('memvault_webhooks', '')"))


async def notifications(dsn: str) -> AsyncIterator[None]:
    """One item once LISTEN holds, then one per NOTIFY on the channel, on a connection of its own,
    until the caller stops iterating or the connection fails. The first item matters: a commit
    made before the LISTEN (while the sender started, or reconnected) notified nobody, so the
    caller sweeps then rather than at its next interval."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(f"LISTEN {CHANNEL}")
        yield None
        async for _ in conn.notifies():
            yield None
