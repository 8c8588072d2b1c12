"""The outbox: an event becomes one delivery row per subscribed endpoint, inserted in the
transaction of the change that caused it, so a change that commits is never without its
deliveries and one that rolls back leaves none. The sender (webhooks/delivery/) sends them.

Events are written in the tenant of the transaction: a system-scope memory's (system tenant)
events go to the system tenant's endpoints only, never to every tenant that can read it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from memvault.db.session import TenantTx
from memvault.principal import Principal
from memvault.webhooks import repository as repo
from memvault.webhooks.delivery import repository as delivery_repo
from memvault.webhooks.schemas import EVENT_TYPES

# (event type, namespace or None for a tenant-wide event, data)
Event = tuple[str, str | None, dict[str, Any]]


# The shares of a capped quota whose crossing is announced (quota.warning).
QUOTA_THRESHOLDS = (80, 100)


def quota_warnings(quota: str, *, limit: int, used: int, adding: int) -> list[Event]:
    """A tenant-wide `quota.warning` for each threshold that going from ``used`` to
    ``used + adding`` crosses (none when it was crossed before)."""
    after = used + adding
    return [
        ("quota.warning", None, {"quota": quota, "limit": limit, "used": after, "threshold_percent": pct})
        for pct in QUOTA_THRESHOLDS
        if used * 100 < pct * limit <= after * 100
    ]


def message_id() -> str:
    """The stable `webhook-id` of one event: the same for every endpoint, retry and replay."""
    return f"msg_{uuid.uuid4().hex}"


def _tenant(who: Principal | uuid.UUID) -> uuid.UUID:
    return who.tenant_id if isinstance(who, Principal) else who


async def emit(
    tx: TenantTx, who: Principal | uuid.UUID, event_type: str, namespace: str | None, data: dict[str, Any]
) -> int:
    """Queue one event for the tenant's endpoints that want it; the number of deliveries made."""
    return await emit_many(tx, who, [(event_type, namespace, data)])


async def emit_many(tx: TenantTx, who: Principal | uuid.UUID, events: Sequence[Event]) -> int:
    """Queue several events in one statement (a batch write's), each with its own message id."""
    if not events:
        return 0
    at = datetime.now(UTC).isoformat()
    rows = []
    for event_type, namespace, data in events:
        if event_type not in EVENT_TYPES:
            raise ValueError(f"unknown webhook event type {event_type!r}")
        rows.append(
            {
                "message_id": message_id(),
                "event_type": event_type,
                "namespace": namespace,
                "payload": {"type": event_type, "timestamp": at, "data": data},
            }
        )
    queued = await repo.insert_deliveries(tx.session, _tenant(who), rows)
    if queued:
        # Senders LISTEN: woken at commit, they deliver in milliseconds rather than at the next
        # sweep. A write that reaches no endpoint sends nothing.
        await delivery_repo.notify(tx.session)
    return queued
