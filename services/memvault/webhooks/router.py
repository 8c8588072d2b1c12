from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Response

from memvault.gateway.deps import AdminPrincipal, Api
from memvault.gateway.idempotency import IDEMPOTENT, NOT_IDEMPOTENT
from memvault.webhooks.schemas import (
    DeliveryPage,
    ReplayOut,
    WebhookCreated,
    WebhookIn,
    WebhookOut,
    WebhookPage,
    WebhookPatch,
    WebhookReplayIn,
    WebhookRotateIn,
)

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"])

Limit = Annotated[int, Query(ge=1, le=200)]
Cursor = Annotated[str | None, Query(max_length=500)]


# Not replayable: a replay would have to store the secret to show it again.
@router.post("", status_code=201, dependencies=[NOT_IDEMPOTENT])
async def create_webhook(body: WebhookIn, p: AdminPrincipal, api: Api) -> WebhookCreated:
    """Subscribe an endpoint to events. The signing `secret` is shown in this response only."""
    return await api.create_webhook(p, body)


@router.get("")
async def list_webhooks(p: AdminPrincipal, api: Api, limit: Limit = 50, cursor: Cursor = None) -> WebhookPage:
    """The tenant's webhook endpoints (never their secrets), newest first."""
    return await api.list_webhooks(p, limit=limit, cursor=cursor)


@router.get("/{endpoint_id}")
async def get_webhook(endpoint_id: uuid.UUID, p: AdminPrincipal, api: Api) -> WebhookOut:
    """One webhook endpoint."""
    return await api.get_webhook(p, endpoint_id)


@router.patch("/{endpoint_id}", dependencies=[IDEMPOTENT])
async def update_webhook(endpoint_id: uuid.UUID, body: WebhookPatch, p: AdminPrincipal, api: Api) -> WebhookOut:
    """Change events, namespaces, description; `enabled: true` re-enables a disabled endpoint."""
    return await api.update_webhook(p, endpoint_id, body)


@router.delete("/{endpoint_id}", status_code=204, dependencies=[IDEMPOTENT])
async def delete_webhook(endpoint_id: uuid.UUID, p: AdminPrincipal, api: Api) -> Response:
    """Delete an endpoint and its deliveries log."""
    await api.delete_webhook(p, endpoint_id)
    return Response(status_code=204)


@router.post("/{endpoint_id}/rotate", dependencies=[NOT_IDEMPOTENT])
async def rotate_webhook_secret(
    endpoint_id: uuid.UUID, p: AdminPrincipal, api: Api, body: WebhookRotateIn | None = None
) -> WebhookCreated:
    """A new signing secret, in `secret` of this response only; the old one keeps signing beside it
    for `grace_seconds` (default 86400, at most 604800)."""
    return await api.rotate_webhook_secret(p, endpoint_id, body or WebhookRotateIn())


@router.get("/{endpoint_id}/deliveries")
async def list_webhook_deliveries(
    endpoint_id: uuid.UUID, p: AdminPrincipal, api: Api, limit: Limit = 50, cursor: Cursor = None
) -> DeliveryPage:
    """The endpoint's deliveries, newest first, with each one's last response."""
    return await api.webhook_deliveries(p, endpoint_id, limit=limit, cursor=cursor)


@router.post("/{endpoint_id}/replay", dependencies=[IDEMPOTENT])
async def replay_webhook(endpoint_id: uuid.UUID, body: WebhookReplayIn, p: AdminPrincipal, api: Api) -> ReplayOut:
    """Send again every event queued to this endpoint since `since`, with its original `webhook-id`."""
    return await api.replay_webhook(p, endpoint_id, body)
