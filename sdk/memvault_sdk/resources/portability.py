from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from memvault_sdk._base import APIRequest, body, params, segment
from memvault_sdk.resources._resource import AsyncAPIResource, SyncAPIResource
from memvault_sdk.types.admin import Account, ForgetParams, ForgetResult, ImportResult, Status


def _jsonl(records: Iterable[Mapping[str, Any]] | str | bytes) -> bytes:
    if isinstance(records, bytes):
        return records
    if isinstance(records, str):
        return records.encode()
    return "\n".join(json.dumps(r, ensure_ascii=False) for r in records).encode()


class Portability(SyncAPIResource):
    def forget(
        self,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        entity_id: str | None = None,
        all: bool | None = None,
        hard: bool | None = None,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> ForgetResult:
        """Forget what concerns one user, session or entity, or (admin) ``all=True`` the whole
        namespace. ``hard=True`` erases for good, every version and copy; otherwise memories are archived."""
        payload = body(ForgetParams, user_id=user_id, session_id=session_id, entity_id=entity_id, all=all, hard=hard)
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/forget",
            json=payload,
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return self._call(req, ForgetResult)

    def export(self, *, embeddings: bool | None = None, namespace: str | None = None) -> list[dict[str, Any]]:
        """The namespace as export records (header, entities, relations, sessions, events, memories,
        traces, end); ``import_`` takes them back."""
        req = APIRequest(
            "GET",
            f"{self._ns(namespace)}/export",
            params=params(embeddings=embeddings),
            headers={"Accept": "application/x-ndjson"},
            jsonl=True,
        )
        return self._call(req, list)

    def import_(
        self,
        records: Iterable[Mapping[str, Any]] | str | bytes,
        *,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> ImportResult:
        """Restore an export (records, or its JSON Lines text) into a namespace: all or nothing,
        under new ids."""
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/import",
            content=_jsonl(records),
            headers={"Content-Type": "application/x-ndjson"},
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return self._call(req, ImportResult)

    def status(self) -> Status:
        """Server version and health; with the key, also its tenant, scopes and namespaces."""
        return self._call(APIRequest("GET", "/v1/status"), Status)

    def account(self) -> Account:
        """The tenant's users count, OAuth clients and grants (admin key)."""
        return self._call(APIRequest("GET", "/v1/account"), Account)

    def revoke_grant(self, grant_id: str) -> None:
        """Revoke one OAuth grant: its tokens stop working at once (admin key)."""
        self._call(APIRequest("DELETE", f"/v1/account/grants/{segment(grant_id)}"), None)


class AsyncPortability(AsyncAPIResource):
    async def forget(
        self,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        entity_id: str | None = None,
        all: bool | None = None,
        hard: bool | None = None,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> ForgetResult:
        """Forget what concerns one user, session or entity, or (admin) ``all=True`` the whole
        namespace. ``hard=True`` erases for good, every version and copy; otherwise memories are archived."""
        payload = body(ForgetParams, user_id=user_id, session_id=session_id, entity_id=entity_id, all=all, hard=hard)
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/forget",
            json=payload,
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return await self._call(req, ForgetResult)

    async def export(self, *, embeddings: bool | None = None, namespace: str | None = None) -> list[dict[str, Any]]:
        """The namespace as export records (header, entities, relations, sessions, events, memories,
        traces, end); ``import_`` takes them back."""
        req = APIRequest(
            "GET",
            f"{self._ns(namespace)}/export",
            params=params(embeddings=embeddings),
            headers={"Accept": "application/x-ndjson"},
            jsonl=True,
        )
        return await self._call(req, list)

    async def import_(
        self,
        records: Iterable[Mapping[str, Any]] | str | bytes,
        *,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> ImportResult:
        """Restore an export (records, or its JSON Lines text) into a namespace: all or nothing,
        under new ids."""
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/import",
            content=_jsonl(records),
            headers={"Content-Type": "application/x-ndjson"},
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return await self._call(req, ImportResult)

    async def status(self) -> Status:
        """Server version and health; with the key, also its tenant, scopes and namespaces."""
        return await self._call(APIRequest("GET", "/v1/status"), Status)

    async def account(self) -> Account:
        """The tenant's users count, OAuth clients and grants (admin key)."""
        return await self._call(APIRequest("GET", "/v1/account"), Account)

    async def revoke_grant(self, grant_id: str) -> None:
        """Revoke one OAuth grant: its tokens stop working at once (admin key)."""
        await self._call(APIRequest("DELETE", f"/v1/account/grants/{segment(grant_id)}"), None)
