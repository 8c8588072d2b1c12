from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from memvault_sdk._request import APIRequest, body, params, returns, segment
from memvault_sdk.pagination import PageData
from memvault_sdk.resources._resource import APIResource, AsyncAPIResource, SyncAPIResource, endpoint, paginated
from memvault_sdk.types.events import (
    IngestParams,
    IngestResult,
    Message,
    MessageParam,
    Observation,
    Role,
    Session,
)


class _Events(APIResource):
    @endpoint
    def ingest(
        self,
        messages: Iterable[MessageParam | dict[str, Any]],
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> APIRequest[IngestResult]:
        """Append up to 500 conversation messages and queue their extraction into memories. The
        result names the extraction job (``client.jobs.wait(result.job_id)``)."""
        payload = body(IngestParams, session_id=session_id, user_id=user_id, messages=list(messages))
        path = f"{self._ns(namespace)}/events"
        return APIRequest("POST", path, returns(IngestResult), body=payload, idempotency_key=idempotency_key)


class _Sessions(APIResource):
    @paginated
    def list(
        self, *, user_id: str | None = None, limit: int | None = None, namespace: str | None = None
    ) -> APIRequest[PageData[Session]]:
        """Sessions with the most recent activity first."""
        query = params(user_id=user_id, limit=limit)
        return APIRequest("GET", f"{self._ns(namespace)}/sessions", returns(PageData[Session]), params=query)

    @endpoint
    def get(self, session_id: str, *, namespace: str | None = None) -> APIRequest[Session]:
        """One session: its user, first and last message times and message count."""
        return APIRequest("GET", f"{self._ns(namespace)}/sessions/{segment(session_id)}", returns(Session))

    @endpoint
    def observations(self, session_id: str, *, namespace: str | None = None) -> APIRequest[Observation]:
        """A session's summary, topics, decisions and open questions, written by its extraction."""
        path = f"{self._ns(namespace)}/sessions/{segment(session_id)}/observations"
        return APIRequest("GET", path, returns(Observation))

    @paginated
    def messages(
        self,
        session_id: str,
        *,
        order: Literal["asc", "desc"] | None = None,
        role: Role | Sequence[Role] | None = None,
        limit: int | None = None,
        namespace: str | None = None,
    ) -> APIRequest[PageData[Message]]:
        """A session's messages in conversation order (``order="desc"``: newest first)."""
        query = params(order=order, role=[role] if isinstance(role, str) else role, limit=limit)
        path = f"{self._ns(namespace)}/sessions/{segment(session_id)}/messages"
        return APIRequest("GET", path, returns(PageData[Message]), params=query)


class Events(_Events, SyncAPIResource):
    pass


class AsyncEvents(_Events, AsyncAPIResource):
    pass


class Sessions(_Sessions, SyncAPIResource):
    pass


class AsyncSessions(_Sessions, AsyncAPIResource):
    pass
