"""Queries of webhook subscriptions, the outbox insert and the deliveries log. Every function
filters by tenant explicitly; RLS is the second lock."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ARRAY, Text, cast, delete, func, insert, select, text, true, update
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.db.pagination import newest_first
from memvault.webhooks.models import WebhookDelivery, WebhookEndpoint

# A replay re-queues at most this many events at once; ask again with a later `since` for more.
MAX_REPLAY = 10_000


async def create(s: AsyncSession, tenant_id: uuid.UUID, values: dict[str, Any]) -> WebhookEndpoint:
    row = await s.scalar(insert(WebhookEndpoint).values(tenant_id=tenant_id, **values).returning(WebhookEndpoint))
    assert row is not None
    return row


async def count(s: AsyncSession, tenant_id: uuid.UUID, *, lock: bool) -> int:
    """The tenant's endpoints. ``lock`` holds the tenant's creation lock to the end of the
    transaction, so two creations at once cannot both see room for one."""
    if lock:
        await s.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended('memvault:webhooks:' || :t, 0))"), {"t": str(tenant_id)}
        )
    return int(await s.scalar(select(func.count()).where(WebhookEndpoint.tenant_id == tenant_id)) or 0)


async def page(
    s: AsyncSession, tenant_id: uuid.UUID, *, within: frozenset[str] | None, limit: int, cursor: str | None
) -> tuple[list[WebhookEndpoint], str | None]:
    """Endpoints newest first; ``within``: only those limited to a subset of these namespaces."""
    stmt = select(WebhookEndpoint).where(WebhookEndpoint.tenant_id == tenant_id)
    if within is not None:
        stmt = stmt.where(
            WebhookEndpoint.namespaces.is_not(None),
            WebhookEndpoint.namespaces.op("<@")(cast(sorted(within), ARRAY(Text))),
        )
    rows, next_cursor = await newest_first(
        s, stmt, WebhookEndpoint.created_at, WebhookEndpoint.id, limit=limit, cursor=cursor
    )
    return list(rows), next_cursor


async def get(
    s: AsyncSession, tenant_id: uuid.UUID, endpoint_id: uuid.UUID, *, lock: bool = False
) -> WebhookEndpoint | None:
    stmt = select(WebhookEndpoint).where(WebhookEndpoint.tenant_id == tenant_id, WebhookEndpoint.id == endpoint_id)
    if lock:
        stmt = stmt.with_for_update()
    return await s.scalar(stmt.execution_options(populate_existing=True))


async def change(
    s: AsyncSession, tenant_id: uuid.UUID, endpoint_id: uuid.UUID, values: dict[str, Any]
) -> WebhookEndpoint:
    stmt = (
        update(WebhookEndpoint)
        .where(WebhookEndpoint.tenant_id == tenant_id, WebhookEndpoint.id == endpoint_id)
        .values(**values, updated_at=func.now())
        .returning(WebhookEndpoint)
    )
    row = await s.scalar(stmt, execution_options={"synchronize_session": False, "populate_existing": True})
    assert row is not None
    return row


async def rotate(
    s: AsyncSession, tenant_id: uuid.UUID, endpoint_id: uuid.UUID, secret: str, grace: timedelta
) -> WebhookEndpoint:
    """The current secret becomes the previous one for ``grace`` (none when 0); an earlier
    previous secret still in its grace period is dropped: at most two sign at once."""
    keep = grace > timedelta(0)
    # In an UPDATE the right-hand sides read the row as it was, so the old secret moves over.
    return await change(
        s,
        tenant_id,
        endpoint_id,
        {
            "previous_secret": WebhookEndpoint.secret if keep else None,
            "previous_secret_expires_at": func.now() + grace if keep else None,
            "secret": secret,
        },
    )


async def remove(s: AsyncSession, tenant_id: uuid.UUID, endpoint_id: uuid.UUID) -> None:
    """The endpoint and, by the foreign key's cascade, its deliveries."""
    await s.execute(
        delete(WebhookEndpoint).where(WebhookEndpoint.tenant_id == tenant_id, WebhookEndpoint.id == endpoint_id)
    )


async def deliveries(
    s: AsyncSession, tenant_id: uuid.UUID, endpoint_id: uuid.UUID, *, limit: int, cursor: str | None
) -> tuple[list[WebhookDelivery], str | None]:
    """One endpoint's deliveries newest first (ix_webhook_deliveries_endpoint)."""
    stmt = select(WebhookDelivery).where(
        WebhookDelivery.tenant_id == tenant_id, WebhookDelivery.endpoint_id == endpoint_id
    )
    rows, next_cursor = await newest_first(
        s, stmt, WebhookDelivery.created_at, WebhookDelivery.id, limit=limit, cursor=cursor
    )
    return list(rows), next_cursor


async def last_deliveries(
    s: AsyncSession, tenant_id: uuid.UUID, endpoint_ids: list[uuid.UUID]
) -> list[WebhookDelivery]:
    """Each endpoint's newest delivery (the first row of its log), for those that have one: one
    probe of ix_webhook_deliveries_endpoint per endpoint, however long each log is."""
    if not endpoint_ids:
        return []
    wanted = (
        func.unnest(cast(endpoint_ids, ARRAY(UUID(as_uuid=True))))
        .table_valued("endpoint_id")
        .render_derived(name="wanted")
    )
    newest = (
        select(WebhookDelivery.id)
        .where(WebhookDelivery.tenant_id == tenant_id, WebhookDelivery.endpoint_id == wanted.c.endpoint_id)
        .order_by(WebhookDelivery.created_at.desc(), WebhookDelivery.id.desc())
        .limit(1)
        .lateral("newest")
    )
    ids = select(newest.c.id).select_from(wanted).join(newest, true())
    stmt = select(WebhookDelivery).where(WebhookDelivery.tenant_id == tenant_id, WebhookDelivery.id.in_(ids))
    return list((await s.scalars(stmt)).all())


# One statement whatever the number of events and endpoints: the events travel as one JSON array
# and meet the tenant's enabled subscriptions in a join, so a write with no subscriber pays one
# round trip that finds nothing. An event without a namespace (a tenant-wide one) reaches only
# endpoints without a namespace filter: a namespace-limited subscriber is shown nothing tenant-wide.
_EMIT = """
INSERT INTO webhook_deliveries (tenant_id, endpoint_id, message_id, event_type, namespace, payload)
SELECT e.tenant_id, e.id, ev.message_id, ev.event_type, ev.namespace, ev.payload
FROM jsonb_to_recordset(CAST(:events AS jsonb))
    AS ev(message_id text, event_type text, namespace text, payload jsonb)
JOIN webhook_endpoints e
  ON e.tenant_id = :tenant_id
 AND e.enabled
 AND ev.event_type = ANY(e.events)
 AND (e.namespaces IS NULL OR ev.namespace = ANY(e.namespaces))
"""


async def insert_deliveries(s: AsyncSession, tenant_id: uuid.UUID, events: list[dict[str, Any]]) -> int:
    """Queue each event (message_id, event_type, namespace, payload) for every endpoint that
    wants it; the number of delivery rows made."""
    result = await s.execute(
        text(_EMIT),
        {"tenant_id": tenant_id, "events": json.dumps(events, separators=(",", ":"), ensure_ascii=False)},
    )
    return int(getattr(result, "rowcount", 0) or 0)


_REPLAY = """
INSERT INTO webhook_deliveries (tenant_id, endpoint_id, message_id, event_type, namespace, payload)
SELECT tenant_id, endpoint_id, message_id, event_type, namespace, payload
FROM (
    SELECT DISTINCT ON (d.message_id) d.*
    FROM webhook_deliveries d
    WHERE d.tenant_id = :tenant_id AND d.endpoint_id = :endpoint_id AND d.created_at >= :since
      AND NOT EXISTS (
          SELECT 1 FROM webhook_deliveries q
          WHERE q.tenant_id = d.tenant_id AND q.endpoint_id = d.endpoint_id
            AND q.message_id = d.message_id AND q.status = 'pending'
      )
    ORDER BY d.message_id, d.created_at
) first
ORDER BY created_at
LIMIT :max
"""


async def replay(s: AsyncSession, tenant_id: uuid.UUID, endpoint_id: uuid.UUID, since: datetime) -> int:
    """A new pending row, due now, for each event queued to the endpoint since ``since`` (once per
    message_id, and not for one still pending): the sent rows stay in the log as they were."""
    result = await s.execute(
        text(_REPLAY), {"tenant_id": tenant_id, "endpoint_id": endpoint_id, "since": since, "max": MAX_REPLAY}
    )
    return int(getattr(result, "rowcount", 0) or 0)
