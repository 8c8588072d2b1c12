from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memvault_sdk._request import NOTHING, APIRequest, body, params, returns, segment
from memvault_sdk.pagination import PageData
from memvault_sdk.resources._resource import APIResource, AsyncAPIResource, SyncAPIResource, endpoint, paginated
from memvault_sdk.types.webhook_endpoints import (
    WebhookCreate,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEndpointCreated,
    WebhookReplay,
    WebhookReplayed,
    WebhookRotate,
    WebhookUpdate,
)


def _path(endpoint_id: str, tail: str = "") -> str:
    return f"/v1/webhooks/{segment(endpoint_id)}{tail}"


class _Webhooks(APIResource):
    @endpoint
    def create(
        self,
        url: str,
        events: Sequence[str],
        *,
        namespaces: Sequence[str] | None = None,
        description: str | None = None,
    ) -> APIRequest[WebhookEndpointCreated]:
        """Subscribe an endpoint to event types (admin scope); ``.secret`` signs its deliveries and
        is in this response only. Not retried once sent: the server keeps no copy to answer with."""
        payload = body(
            WebhookCreate,
            url=url,
            events=list(events),
            namespaces=list(namespaces) if namespaces is not None else None,
            description=description,
        )
        return APIRequest("POST", "/v1/webhooks", returns(WebhookEndpointCreated), body=payload, retry="once")

    @paginated
    def list(self, *, limit: int | None = None) -> APIRequest[PageData[WebhookEndpoint]]:
        """The tenant's webhook endpoints, newest first, without their secrets."""
        return APIRequest("GET", "/v1/webhooks", returns(PageData[WebhookEndpoint]), params=params(limit=limit))

    @endpoint
    def get(self, endpoint_id: str) -> APIRequest[WebhookEndpoint]:
        return APIRequest("GET", _path(endpoint_id), returns(WebhookEndpoint))

    @endpoint
    def update(
        self,
        endpoint_id: str,
        *,
        events: Sequence[str] | None = None,
        namespaces: Sequence[str] | None = None,
        description: str | None = None,
        enabled: bool | None = None,
        idempotency_key: str | None = None,
    ) -> APIRequest[WebhookEndpoint]:
        """Change events, namespaces or description; ``enabled=True`` re-enables a disabled endpoint."""
        payload = body(
            WebhookUpdate,
            events=list(events) if events is not None else None,
            namespaces=list(namespaces) if namespaces is not None else None,
            description=description,
            enabled=enabled,
        )
        return APIRequest(
            "PATCH", _path(endpoint_id), returns(WebhookEndpoint), body=payload, idempotency_key=idempotency_key
        )

    @endpoint
    def delete(self, endpoint_id: str, *, idempotency_key: str | None = None) -> APIRequest[None]:
        """Delete an endpoint and its deliveries log."""
        return APIRequest("DELETE", _path(endpoint_id), NOTHING, idempotency_key=idempotency_key)

    @endpoint
    def rotate(self, endpoint_id: str, *, grace_seconds: int | None = None) -> APIRequest[WebhookEndpointCreated]:
        """A new signing secret (``.secret``, in this response only); the old one signs beside it for
        ``grace_seconds`` (server default 86400, at most 604800). Not retried once sent."""
        payload = body(WebhookRotate, grace_seconds=grace_seconds)
        return APIRequest(
            "POST", _path(endpoint_id, "/rotate"), returns(WebhookEndpointCreated), body=payload, retry="once"
        )

    @paginated
    def deliveries(self, endpoint_id: str, *, limit: int | None = None) -> APIRequest[PageData[WebhookDelivery]]:
        """The endpoint's deliveries, newest first: status, attempts, the last response."""
        return APIRequest(
            "GET", _path(endpoint_id, "/deliveries"), returns(PageData[WebhookDelivery]), params=params(limit=limit)
        )

    @endpoint
    def replay(
        self, endpoint_id: str, since: datetime, *, idempotency_key: str | None = None
    ) -> APIRequest[WebhookReplayed]:
        """Send again every event queued to the endpoint since ``since`` (timezone-aware)."""
        payload = body(WebhookReplay, since=since)
        return APIRequest(
            "POST",
            _path(endpoint_id, "/replay"),
            returns(WebhookReplayed),
            body=payload,
            idempotency_key=idempotency_key,
        )


class Webhooks(_Webhooks, SyncAPIResource):
    pass


class AsyncWebhooks(_Webhooks, AsyncAPIResource):
    pass
