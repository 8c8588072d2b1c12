from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memvault_sdk._base import APIRequest, body, params, segment
from memvault_sdk.pagination import AsyncPaginator, SyncPage
from memvault_sdk.resources._resource import AsyncAPIResource, SyncAPIResource
from memvault_sdk.types.admin import (
    ApiKey,
    ApiKeyCreated,
    AuditEntry,
    KeyCreate,
    Namespace,
    NamespaceCreate,
    Scope,
)


class Namespaces(SyncAPIResource):
    def create(self, name: str, *, description: str | None = None, idempotency_key: str | None = None) -> Namespace:
        """Create a namespace: an isolated memory space (admin scope)."""
        req = APIRequest(
            "POST",
            "/v1/namespaces",
            json=body(NamespaceCreate, name=name, description=description),
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return self._call(req, Namespace)

    def list(self) -> list[Namespace]:
        """Namespaces this key may use, with their memory counts."""
        return self._call(APIRequest("GET", "/v1/namespaces"), list[Namespace])

    def get(self, name: str) -> Namespace:
        return self._call(APIRequest("GET", f"/v1/namespaces/{segment(name)}"), Namespace)

    def delete(self, name: str) -> None:
        """Delete a namespace and every memory in it, for good (admin scope)."""
        self._call(APIRequest("DELETE", f"/v1/namespaces/{segment(name)}"), None)


class Keys(SyncAPIResource):
    def create(
        self,
        *,
        name: str | None = None,
        scopes: Sequence[Scope] | None = None,
        namespaces: Sequence[str] | None = None,
        default_namespace: str | None = None,
    ) -> ApiKeyCreated:
        """Create an API key; ``.key`` holds the secret, in this response only. Not retried once
        sent: the server keeps no copy of the secret to answer a retry with."""
        payload = body(
            KeyCreate,
            name=name,
            scopes=list(scopes) if scopes is not None else None,
            namespaces=list(namespaces) if namespaces is not None else None,
            default_namespace=default_namespace,
        )
        return self._call(APIRequest("POST", "/v1/keys", json=payload, retry_safe=False), ApiKeyCreated)

    def list(self) -> list[ApiKey]:
        """The tenant's API keys, without their secrets."""
        return self._call(APIRequest("GET", "/v1/keys"), list[ApiKey])

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke a key at once; revoking twice is harmless."""
        return self._call(APIRequest("DELETE", f"/v1/keys/{segment(key_id)}"), ApiKey)


class Audit(SyncAPIResource):
    def list(
        self,
        *,
        namespace: str | None = None,
        action: str | None = None,
        target_id: str | None = None,
        since: datetime | None = None,
        limit: int | None = None,
    ) -> SyncPage[AuditEntry]:
        """Every write and delete in the tenant, newest first (admin scope). ``namespace`` here
        filters; it does not default to the client's namespace."""
        query = params(namespace=namespace, action=action, target_id=target_id, since=since, limit=limit)
        return self._page(APIRequest("GET", "/v1/audit", params=query), AuditEntry)


class AsyncNamespaces(AsyncAPIResource):
    async def create(
        self, name: str, *, description: str | None = None, idempotency_key: str | None = None
    ) -> Namespace:
        """Create a namespace: an isolated memory space (admin scope)."""
        req = APIRequest(
            "POST",
            "/v1/namespaces",
            json=body(NamespaceCreate, name=name, description=description),
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return await self._call(req, Namespace)

    async def list(self) -> list[Namespace]:
        """Namespaces this key may use, with their memory counts."""
        return await self._call(APIRequest("GET", "/v1/namespaces"), list[Namespace])

    async def get(self, name: str) -> Namespace:
        return await self._call(APIRequest("GET", f"/v1/namespaces/{segment(name)}"), Namespace)

    async def delete(self, name: str) -> None:
        """Delete a namespace and every memory in it, for good (admin scope)."""
        await self._call(APIRequest("DELETE", f"/v1/namespaces/{segment(name)}"), None)


class AsyncKeys(AsyncAPIResource):
    async def create(
        self,
        *,
        name: str | None = None,
        scopes: Sequence[Scope] | None = None,
        namespaces: Sequence[str] | None = None,
        default_namespace: str | None = None,
    ) -> ApiKeyCreated:
        """Create an API key; ``.key`` holds the secret, in this response only. Not retried once
        sent: the server keeps no copy of the secret to answer a retry with."""
        payload = body(
            KeyCreate,
            name=name,
            scopes=list(scopes) if scopes is not None else None,
            namespaces=list(namespaces) if namespaces is not None else None,
            default_namespace=default_namespace,
        )
        return await self._call(APIRequest("POST", "/v1/keys", json=payload, retry_safe=False), ApiKeyCreated)

    async def list(self) -> list[ApiKey]:
        """The tenant's API keys, without their secrets."""
        return await self._call(APIRequest("GET", "/v1/keys"), list[ApiKey])

    async def revoke(self, key_id: str) -> ApiKey:
        """Revoke a key at once; revoking twice is harmless."""
        return await self._call(APIRequest("DELETE", f"/v1/keys/{segment(key_id)}"), ApiKey)


class AsyncAudit(AsyncAPIResource):
    def list(
        self,
        *,
        namespace: str | None = None,
        action: str | None = None,
        target_id: str | None = None,
        since: datetime | None = None,
        limit: int | None = None,
    ) -> AsyncPaginator[AuditEntry]:
        """Every write and delete in the tenant, newest first (admin scope). ``namespace`` here
        filters; it does not default to the client's namespace."""
        query = params(namespace=namespace, action=action, target_id=target_id, since=since, limit=limit)
        return self._page(APIRequest("GET", "/v1/audit", params=query), AuditEntry)
