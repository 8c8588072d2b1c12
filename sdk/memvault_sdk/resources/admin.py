from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime

from memvault_sdk._request import NOTHING, APIRequest, body, params, returns, segment
from memvault_sdk.pagination import PageData
from memvault_sdk.resources._resource import APIResource, AsyncAPIResource, SyncAPIResource, endpoint, paginated
from memvault_sdk.types.admin import (
    ApiKey,
    ApiKeyCreated,
    AuditEntry,
    KeyCreate,
    KeyRotate,
    Namespace,
    NamespaceCreate,
    Scope,
)


class _Namespaces(APIResource):
    @endpoint
    def create(
        self, name: str, *, description: str | None = None, idempotency_key: str | None = None
    ) -> APIRequest[Namespace]:
        """Create a namespace: an isolated memory space (admin scope)."""
        payload = body(NamespaceCreate, name=name, description=description)
        return APIRequest("POST", "/v1/namespaces", returns(Namespace), body=payload, idempotency_key=idempotency_key)

    @endpoint
    def list(self) -> APIRequest[builtins.list[Namespace]]:
        """Namespaces this key may use, with their memory counts."""
        return APIRequest("GET", "/v1/namespaces", returns(builtins.list[Namespace]))

    @endpoint
    def get(self, name: str) -> APIRequest[Namespace]:
        return APIRequest("GET", f"/v1/namespaces/{segment(name)}", returns(Namespace))

    @endpoint
    def delete(self, name: str, *, idempotency_key: str | None = None) -> APIRequest[None]:
        """Delete a namespace and every memory in it, for good (admin scope)."""
        return APIRequest("DELETE", f"/v1/namespaces/{segment(name)}", NOTHING, idempotency_key=idempotency_key)


class _Keys(APIResource):
    @endpoint
    def create(
        self,
        *,
        name: str | None = None,
        scopes: Sequence[Scope] | None = None,
        namespaces: Sequence[str] | None = None,
        default_namespace: str | None = None,
        expires_at: datetime | None = None,
        expires_in_days: int | None = None,
    ) -> APIRequest[ApiKeyCreated]:
        """Create an API key; ``.key`` holds the secret, in this response only. ``expires_at``
        (timezone-aware) or ``expires_in_days``: when it stops working (default never). Not retried
        once sent: the server keeps no copy of the secret to answer a retry with."""
        payload = body(
            KeyCreate,
            name=name,
            scopes=list(scopes) if scopes is not None else None,
            namespaces=list(namespaces) if namespaces is not None else None,
            default_namespace=default_namespace,
            expires_at=expires_at,
            expires_in_days=expires_in_days,
        )
        return APIRequest("POST", "/v1/keys", returns(ApiKeyCreated), body=payload, retry="once")

    @paginated
    def list(self, *, limit: int | None = None) -> APIRequest[PageData[ApiKey]]:
        """The tenant's API keys (those this key may act on), newest first, without their secrets."""
        return APIRequest("GET", "/v1/keys", returns(PageData[ApiKey]), params=params(limit=limit))

    @endpoint
    def rotate(self, key_id: str, *, grace_seconds: int | None = None) -> APIRequest[ApiKeyCreated]:
        """Give a key a new secret (``.key``, in this response only); the old secret keeps working
        for ``grace_seconds`` (server default 3600, at most 86400). Not retried once sent, like
        ``create``: a second rotation would end the first new secret's life at once."""
        payload = body(KeyRotate, grace_seconds=grace_seconds)
        return APIRequest(
            "POST", f"/v1/keys/{segment(key_id)}/rotate", returns(ApiKeyCreated), body=payload, retry="once"
        )

    @endpoint
    def revoke(self, key_id: str, *, idempotency_key: str | None = None) -> APIRequest[ApiKey]:
        """Revoke a key at once; revoking twice is harmless."""
        return APIRequest("DELETE", f"/v1/keys/{segment(key_id)}", returns(ApiKey), idempotency_key=idempotency_key)


class _Audit(APIResource):
    @paginated
    def list(
        self,
        *,
        namespace: str | None = None,
        action: str | None = None,
        target_id: str | None = None,
        actor: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
    ) -> APIRequest[PageData[AuditEntry]]:
        """Every write and delete in the tenant, newest first (admin scope). ``namespace`` here
        filters; it does not default to the client's namespace. ``actor``: one actor's entries
        (``key:<id>``, ``user:<id>``, or a member's email); ``until``: entries before it."""
        query = params(
            namespace=namespace, action=action, target_id=target_id, actor=actor, since=since, until=until, limit=limit
        )
        return APIRequest("GET", "/v1/audit", returns(PageData[AuditEntry]), params=query)


class Namespaces(_Namespaces, SyncAPIResource):
    pass


class AsyncNamespaces(_Namespaces, AsyncAPIResource):
    pass


class Keys(_Keys, SyncAPIResource):
    pass


class AsyncKeys(_Keys, AsyncAPIResource):
    pass


class Audit(_Audit, SyncAPIResource):
    pass


class AsyncAudit(_Audit, AsyncAPIResource):
    pass
