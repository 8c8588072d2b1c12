"""The webhook part of the facade: subscribe, list, change, delete, rotate the signing secret,
read the deliveries log and replay. NamespaceAPI inherits it. The sender lives in
webhooks/delivery/; events are queued by webhooks/outbox.py in each change's own transaction."""

from __future__ import annotations

import base64
import secrets
import uuid
from datetime import timedelta
from typing import Any

from memvault.db.session import TenantTx
from memvault.errors import InvalidInput, NotFound
from memvault.facade import FacadeBase
from memvault.operations import operation
from memvault.plans.quotas import QuotaExceeded
from memvault.plans.room import take_room
from memvault.principal import Principal
from memvault.webhooks import repository as repo
from memvault.webhooks.models import WebhookDelivery, WebhookEndpoint
from memvault.webhooks.schemas import (
    DeliveryOut,
    DeliveryPage,
    ReplayOut,
    WebhookCreated,
    WebhookIn,
    WebhookOut,
    WebhookPage,
    WebhookPatch,
    WebhookReplayIn,
    WebhookRotateIn,
    WebhookSummary,
    WebhookSummaryPage,
    url_refusal,
)

# Every write fans out to each subscribed endpoint in its own transaction: a ceiling on
# endpoints per tenant bounds what one write can cost, whatever the plan says.
MAX_ENDPOINTS = 20


class WebhookNotFound(NotFound):
    code = "webhook_not_found"
    title = "Webhook endpoint not found"


class WebhookUrlRefused(InvalidInput):
    code = "webhook_url_refused"
    title = "Webhook URL refused"


def _delivery_out(row: WebhookDelivery) -> DeliveryOut:
    # A sent row keeps the due time of its last lease in the table; only a pending one is due again.
    out = DeliveryOut.model_validate(row)
    return out if row.status == "pending" else out.model_copy(update={"next_attempt_at": None})


def new_secret() -> str:
    """A Standard Webhooks signing secret: `whsec_` and the base64 of 32 random bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


class WebhookOps(FacadeBase):
    def _check_webhook_url(self, url: str) -> None:
        why = url_refusal(url, allow_private=bool(getattr(self._settings, "webhook_allow_private", False)))
        if why is not None:
            raise WebhookUrlRefused(f"Webhook URL refused: {why}.", extra={"field": "url"})

    async def _webhook_endpoint(
        self, tx: TenantTx, p: Principal, endpoint_id: uuid.UUID, *, lock: bool = False
    ) -> WebhookEndpoint:
        """The endpoint, if p reaches all it covers; 404 alike for one out of reach, as the list
        does not show it either."""
        row = await repo.get(tx.session, p.tenant_id, endpoint_id, lock=lock)
        if row is None or not p.covers(row.namespaces):
            raise WebhookNotFound(f"No webhook endpoint with id {endpoint_id}.")
        return row

    @operation("write")
    async def create_webhook(self, p: Principal, body: WebhookIn) -> WebhookCreated:
        """Subscribe an endpoint to event types (in some namespaces, or all). The signing secret is
        in the response once and never again."""
        p.require_reach("admin", body.namespaces)
        self._check_webhook_url(body.url)
        limits = (await self._plans.of(p.tenant_id)).limits
        secret = new_secret()
        async with self._db.tenant_tx(p.tenant_id) as tx:
            used = await repo.count(tx.session, p.tenant_id, lock=True)
            await take_room(tx, limits, "webhooks", used=used)
            if used >= MAX_ENDPOINTS:
                raise QuotaExceeded("webhooks", limit=MAX_ENDPOINTS, used=used)
            row = await repo.create(
                tx.session,
                p.tenant_id,
                {
                    "url": body.url,
                    "description": body.description,
                    "events": body.events,
                    "namespaces": body.namespaces,
                    "secret": secret,
                    "created_by": p.subject,
                },
            )
            await self._audit(
                tx,
                p,
                "webhook.create",
                target_id=str(row.id),
                detail={"url": body.url, "events": body.events, "namespaces": body.namespaces},
            )
        return WebhookCreated.model_validate({**WebhookOut.model_validate(row).model_dump(), "secret": secret})

    @operation("read")
    async def list_webhooks(self, p: Principal, *, limit: int = 50, cursor: str | None = None) -> WebhookPage:
        """The tenant's webhook endpoints within p's reach, newest first (never their secrets)."""
        p.require("admin")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            rows, next_cursor = await repo.page(
                tx.session, p.tenant_id, within=p.namespaces, limit=limit, cursor=cursor
            )
        return WebhookPage(data=[WebhookOut.model_validate(r) for r in rows], next_cursor=next_cursor)

    @operation("read")
    async def list_webhook_summaries(
        self, p: Principal, *, limit: int = 50, cursor: str | None = None
    ) -> WebhookSummaryPage:
        """list_webhooks with each endpoint's newest delivery (how it last went), read in the same
        transaction: the dashboard's list of endpoints."""
        p.require("admin")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            rows, next_cursor = await repo.page(
                tx.session, p.tenant_id, within=p.namespaces, limit=limit, cursor=cursor
            )
            last = {d.endpoint_id: d for d in await repo.last_deliveries(tx.session, p.tenant_id, [r.id for r in rows])}
        return WebhookSummaryPage(
            data=[
                WebhookSummary.model_validate(
                    {
                        **WebhookOut.model_validate(r).model_dump(),
                        "last_delivery": _delivery_out(last[r.id]) if r.id in last else None,
                    }
                )
                for r in rows
            ],
            next_cursor=next_cursor,
        )

    @operation("read")
    async def get_webhook(self, p: Principal, endpoint_id: uuid.UUID) -> WebhookOut:
        """One webhook endpoint (without its secret)."""
        p.require("admin")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            row = await self._webhook_endpoint(tx, p, endpoint_id)
        return WebhookOut.model_validate(row)

    @operation("write")
    async def update_webhook(self, p: Principal, endpoint_id: uuid.UUID, patch: WebhookPatch) -> WebhookOut:
        """Change an endpoint's events, namespaces, description, or enable/disable it. Enabling
        clears why it was disabled, so its pending deliveries go out again."""
        p.require("admin")
        given = patch.model_fields_set
        values: dict[str, Any] = {name: getattr(patch, name) for name in ("events", "description") if name in given}
        if any(values.get(name, "") is None for name in ("events", "description")):
            raise InvalidInput("events and description cannot be null", extra={"field": "events"})
        if "namespaces" in given:
            p.require_reach("admin", patch.namespaces)
            values["namespaces"] = patch.namespaces
        if patch.enabled is not None:
            values["enabled"] = patch.enabled
            values |= (
                {"disabled_reason": None, "failing_since": None} if patch.enabled else {"disabled_reason": "manual"}
            )
        async with self._db.tenant_tx(p.tenant_id) as tx:
            row = await self._webhook_endpoint(tx, p, endpoint_id, lock=True)
            if patch.enabled is False and not row.enabled:
                values.pop("disabled_reason")  # already off: keep the reason it stopped for
            if values:
                row = await repo.change(tx.session, p.tenant_id, endpoint_id, values)
                await self._audit(
                    tx, p, "webhook.update", target_id=str(endpoint_id), detail={"fields": sorted(values)}
                )
        return WebhookOut.model_validate(row)

    @operation("write")
    async def delete_webhook(self, p: Principal, endpoint_id: uuid.UUID) -> None:
        """Delete an endpoint with its deliveries log; what was still pending is not sent."""
        p.require("admin")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            row = await self._webhook_endpoint(tx, p, endpoint_id, lock=True)
            await repo.remove(tx.session, p.tenant_id, endpoint_id)
            await self._audit(tx, p, "webhook.delete", target_id=str(endpoint_id), detail={"url": row.url})

    @operation("write")
    async def rotate_webhook_secret(
        self, p: Principal, endpoint_id: uuid.UUID, body: WebhookRotateIn
    ) -> WebhookCreated:
        """A new signing secret (in the response once); the old one signs beside it for
        ``grace_seconds``, so the receiver can switch without a delivery failing verification."""
        p.require("admin")
        secret = new_secret()
        async with self._db.tenant_tx(p.tenant_id) as tx:
            await self._webhook_endpoint(tx, p, endpoint_id, lock=True)
            row = await repo.rotate(tx.session, p.tenant_id, endpoint_id, secret, timedelta(seconds=body.grace_seconds))
            await self._audit(
                tx, p, "webhook.rotate", target_id=str(endpoint_id), detail={"grace_seconds": body.grace_seconds}
            )
        return WebhookCreated.model_validate({**WebhookOut.model_validate(row).model_dump(), "secret": secret})

    @operation("read")
    async def webhook_deliveries(
        self, p: Principal, endpoint_id: uuid.UUID, *, limit: int = 50, cursor: str | None = None
    ) -> DeliveryPage:
        """An endpoint's deliveries, newest first: status, attempts, the last response's status and
        excerpt, latency; follow `next_cursor` for more."""
        p.require("admin")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            await self._webhook_endpoint(tx, p, endpoint_id)
            rows, next_cursor = await repo.deliveries(tx.session, p.tenant_id, endpoint_id, limit=limit, cursor=cursor)
        return DeliveryPage(data=[_delivery_out(r) for r in rows], next_cursor=next_cursor)

    @operation("write")
    async def replay_webhook(self, p: Principal, endpoint_id: uuid.UUID, body: WebhookReplayIn) -> ReplayOut:
        """Send again, as new pending deliveries due now with their original `webhook-id`, every
        event queued to the endpoint since ``since`` (up to 10,000 per call)."""
        p.require("admin")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            await self._webhook_endpoint(tx, p, endpoint_id, lock=True)
            n = await repo.replay(tx.session, p.tenant_id, endpoint_id, body.since)
            await self._audit(
                tx,
                p,
                "webhook.replay",
                target_id=str(endpoint_id),
                detail={"since": body.since.isoformat(), "requeued": n},
            )
        return ReplayOut(requeued=n)
