"""Webhook endpoints (subscriptions) and their deliveries log. Verifying a delivery is
``memvault_sdk.webhooks.verify``."""

from __future__ import annotations

from datetime import datetime

from memvault_sdk.types._model import Model, Params


class WebhookCreate(Params):
    url: str
    events: list[str]
    namespaces: list[str] | None = None
    description: str | None = None


class WebhookUpdate(Params):
    events: list[str] | None = None
    namespaces: list[str] | None = None
    description: str | None = None
    enabled: bool | None = None


class WebhookRotate(Params):
    grace_seconds: int | None = None


class WebhookReplay(Params):
    since: datetime


class WebhookEndpoint(Model):
    id: str
    url: str
    description: str
    events: list[str]
    namespaces: list[str] | None = None
    enabled: bool
    disabled_reason: str | None = None
    failing_since: datetime | None = None
    previous_secret_expires_at: datetime | None = None
    created_by: str
    created_at: datetime
    updated_at: datetime


class WebhookEndpointCreated(WebhookEndpoint):
    # The signing secret (whsec_...): in this response only.
    secret: str


class WebhookDelivery(Model):
    id: str
    message_id: str
    event_type: str
    namespace: str | None = None
    status: str
    attempts: int
    response_status: int | None = None
    response_excerpt: str | None = None
    latency_ms: int | None = None
    error: str | None = None
    created_at: datetime
    last_attempt_at: datetime | None = None
    next_attempt_at: datetime | None = None


class WebhookReplayed(Model):
    requeued: int
