from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from memvault_sdk._request import NOTHING, APIRequest, body, params, returns, returns_lines, segment
from memvault_sdk.resources._resource import APIResource, AsyncAPIResource, SyncAPIResource, endpoint
from memvault_sdk.types.admin import ExportRecord, ForgetParams, ForgetResult, ImportResult, Status


def _jsonl(records: Iterable[Mapping[str, Any]] | str | bytes) -> bytes:
    if isinstance(records, bytes):
        return records
    if isinstance(records, str):
        return records.encode()
    return "\n".join(json.dumps(r, ensure_ascii=False) for r in records).encode()


class _Portability(APIResource):
    @endpoint
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
    ) -> APIRequest[ForgetResult]:
        """Forget what concerns one user, session or entity, or (admin) ``all=True`` the whole
        namespace. ``hard=True`` erases for good, every version and copy; otherwise memories are archived."""
        payload = body(ForgetParams, user_id=user_id, session_id=session_id, entity_id=entity_id, all=all, hard=hard)
        path = f"{self._ns(namespace)}/forget"
        return APIRequest("POST", path, returns(ForgetResult), body=payload, idempotency_key=idempotency_key)

    @endpoint
    def export(self, *, embeddings: bool | None = None, namespace: str | None = None) -> APIRequest[list[ExportRecord]]:
        """The namespace as export records (header, entities, relations, sessions, events, memories,
        traces, end); ``import_`` takes them back."""
        return APIRequest(
            "GET",
            f"{self._ns(namespace)}/export",
            returns_lines(ExportRecord),
            params=params(embeddings=embeddings),
            headers={"Accept": "application/x-ndjson"},
        )

    @endpoint
    def import_(
        self,
        records: Iterable[Mapping[str, Any]] | str | bytes,
        *,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> APIRequest[ImportResult]:
        """Restore an export (records, or its JSON Lines text) into a namespace: all or nothing,
        under new ids."""
        return APIRequest(
            "POST",
            f"{self._ns(namespace)}/import",
            returns(ImportResult),
            content=_jsonl(records),
            headers={"Content-Type": "application/x-ndjson"},
            idempotency_key=idempotency_key,
        )

    @endpoint
    def status(self) -> APIRequest[Status]:
        """Server version and health; with the key, also its tenant, scopes and namespaces."""
        return APIRequest("GET", "/v1/status", returns(Status))

    @endpoint
    def revoke_grant(self, grant_id: str, *, idempotency_key: str | None = None) -> APIRequest[None]:
        """Revoke one OAuth grant: its tokens stop working at once (admin key)."""
        path = f"/v1/account/grants/{segment(grant_id)}"
        return APIRequest("DELETE", path, NOTHING, idempotency_key=idempotency_key)


class Portability(_Portability, SyncAPIResource):
    pass


class AsyncPortability(_Portability, AsyncAPIResource):
    pass
