"""Webhook subscriptions and their deliveries log over REST; the event types; the subscribe-time
URL rule (the sender checks the resolved addresses again at delivery time, against DNS rebinding)."""

from __future__ import annotations

import ipaddress
import uuid
from datetime import datetime
from typing import Literal
from urllib.parse import urlsplit

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from memvault.fields import Body
from memvault.namespaces.schemas import NamespaceNames

# Every event a subscription may ask for; the `type` of each payload.
EVENT_TYPES = (
    "memory.created",
    "memory.updated",
    "memory.superseded",
    "memory.archived",
    "memory.deleted",
    "forget.completed",
    "events.extracted",
    "job.succeeded",
    "job.failed",
    "quota.warning",
    "webhook.disabled",
)
# A rotated-away secret signs beside the new one for at most a week (default a day), so receivers
# can roll their configuration without missing a delivery.
DEFAULT_GRACE_S = 86_400
MAX_GRACE_S = 7 * 86_400
MAX_URL = 2048
# Hosts that name this machine or a cloud's metadata service however they resolve.
_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "metadata.google.internal"})

DeliveryStatus = Literal["pending", "succeeded", "failed"]


def url_refusal(url: str, *, allow_private: bool) -> str | None:
    """Why ``url`` may not be subscribed, or None. Pure: literal addresses and well-known local
    names only; names are resolved, and their addresses checked, when each delivery is sent."""
    try:
        parts = urlsplit(url)
        port = parts.port  # raises on a port that is not a number in range
    except ValueError:
        return "the URL cannot be parsed"
    del port
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "the URL must be absolute, http or https"
    if parts.scheme == "http" and not allow_private:
        return "the URL must use https"
    if parts.username is not None or parts.password is not None:
        return "the URL must not carry credentials; the signature authenticates each delivery"
    if allow_private:
        return None
    host = parts.hostname.rstrip(".").lower()
    if host in _LOCAL_NAMES or host.endswith(".localhost"):
        return f"the host '{host}' is this machine"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None  # a name: checked against what it resolves to at delivery time
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if not address.is_global or address.is_multicast:
        # Loopback, private, link-local (169.254.169.254, the metadata service), reserved, shared.
        return f"the address {address} is not a public one"
    return None


def _known_events(v: list[str]) -> list[str]:
    unknown = sorted(set(v) - set(EVENT_TYPES))
    if unknown:
        raise ValueError(f"unknown event types {unknown}; use {list(EVENT_TYPES)}")
    return sorted(set(v), key=EVENT_TYPES.index)


class WebhookIn(Body):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=MAX_URL, description="Where deliveries are POSTed (https).")
    events: list[str] = Field(min_length=1, description=f"Event types to receive: {', '.join(EVENT_TYPES)}.")
    namespaces: NamespaceNames = Field(
        default=None,
        description="Only events of these namespaces; omit for all (then tenant-wide events too).",
    )
    description: str = Field(default="", max_length=500)

    _events = field_validator("events")(_known_events)


class WebhookPatch(Body):
    model_config = ConfigDict(extra="forbid")

    events: list[str] | None = Field(default=None, min_length=1)
    namespaces: NamespaceNames = Field(default=None, description="null: every namespace.")
    description: str | None = Field(default=None, max_length=500)
    enabled: bool | None = Field(
        default=None, description="true re-enables a disabled endpoint and resumes its pending deliveries."
    )

    @field_validator("events")
    @classmethod
    def _events(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else _known_events(v)


class WebhookRotateIn(Body):
    model_config = ConfigDict(extra="forbid")

    grace_seconds: int = Field(
        default=DEFAULT_GRACE_S,
        ge=0,
        le=MAX_GRACE_S,
        description="How long the current secret keeps signing beside the new one (0: stops at once).",
    )


class WebhookReplayIn(Body):
    model_config = ConfigDict(extra="forbid")

    since: AwareDatetime = Field(description="Send again every event delivered (or not) to this endpoint since then.")


class WebhookOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    url: str
    description: str
    events: list[str]
    namespaces: list[str] | None
    enabled: bool
    disabled_reason: str | None = Field(description="Why it stopped: 'gone' (410), 'failing' (3 days), 'manual'.")
    failing_since: datetime | None
    previous_secret_expires_at: datetime | None = Field(
        description="Until when the secret replaced by the last rotation still signs."
    )
    created_by: str
    created_at: datetime
    updated_at: datetime


class WebhookCreated(WebhookOut):
    secret: str = Field(description="The signing secret (whsec_...). Shown once; store it now.")


class WebhookPage(BaseModel):
    data: list[WebhookOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class DeliveryOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    message_id: str = Field(description="The `webhook-id` header: the same for every retry and replay.")
    event_type: str
    namespace: str | None
    status: DeliveryStatus
    attempts: int
    response_status: int | None
    response_excerpt: str | None
    latency_ms: int | None
    error: str | None
    created_at: datetime
    last_attempt_at: datetime | None
    next_attempt_at: datetime | None = Field(description="When the next attempt is due, while pending.")


class DeliveryPage(BaseModel):
    data: list[DeliveryOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class WebhookSummary(WebhookOut):
    last_delivery: DeliveryOut | None = Field(description="The newest delivery (the first of its log), if any.")


class WebhookSummaryPage(BaseModel):
    data: list[WebhookSummary]
    next_cursor: str | None


class ReplayOut(BaseModel):
    requeued: int = Field(description="Events queued to be sent again (one each, however often they were sent).")
