from __future__ import annotations

from memvault_sdk._request import APIRequest, body, params, returns
from memvault_sdk.pagination import PageData
from memvault_sdk.resources._resource import APIResource, AsyncAPIResource, SyncAPIResource, endpoint, paginated
from memvault_sdk.types.contradictions import (
    Contradiction,
    ContradictionCreate,
    ContradictionResolve,
    ContradictionState,
    Resolution,
)


class _Contradictions(APIResource):
    @endpoint
    def mark(
        self,
        memory_id: str,
        other_id: str,
        *,
        note: str | None = None,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> APIRequest[Contradiction]:
        """Mark two memories as contradicting each other; until resolved, search hits of either list
        the other in ``contradicted_by``. Marking an open pair again returns its mark."""
        payload = body(ContradictionCreate, memory_id=str(memory_id), other_id=str(other_id), note=note)
        path = f"{self._ns(namespace)}/contradictions"
        return APIRequest("POST", path, returns(Contradiction), body=payload, idempotency_key=idempotency_key)

    @paginated
    def list(
        self,
        *,
        state: ContradictionState | None = None,
        memory_id: str | None = None,
        limit: int | None = None,
        namespace: str | None = None,
    ) -> APIRequest[PageData[Contradiction]]:
        """Contradictions newest first; ``state`` open or resolved, ``memory_id`` on either side."""
        query = params(state=state, memory_id=memory_id, limit=limit)
        path = f"{self._ns(namespace)}/contradictions"
        return APIRequest("GET", path, returns(PageData[Contradiction]), params=query)

    @endpoint
    def resolve(
        self,
        resolution: Resolution,
        *,
        contradiction_id: str | None = None,
        memory_id: str | None = None,
        other_id: str | None = None,
        keep_id: str | None = None,
        note: str | None = None,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> APIRequest[Contradiction]:
        """Resolve a contradiction named by ``contradiction_id`` or by its two memories. ``keep_one``
        keeps ``keep_id`` and archives the other memory; ``keep_both`` and ``note`` change no memory."""
        payload = body(
            ContradictionResolve,
            resolution=resolution,
            contradiction_id=contradiction_id,
            memory_id=memory_id,
            other_id=other_id,
            keep_id=keep_id,
            note=note,
        )
        path = f"{self._ns(namespace)}/contradictions/resolve"
        return APIRequest("POST", path, returns(Contradiction), body=payload, idempotency_key=idempotency_key)


class Contradictions(_Contradictions, SyncAPIResource):
    pass


class AsyncContradictions(_Contradictions, AsyncAPIResource):
    pass
