from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from memvault_sdk._base import APIRequest, body, params, segment
from memvault_sdk.pagination import AsyncPaginator, SyncPage
from memvault_sdk.resources._resource import AsyncAPIResource, SyncAPIResource
from memvault_sdk.types.events import IngestParams, IngestResult, Message, MessageParam, Role, Session


class Events(SyncAPIResource):
    def ingest(
        self,
        messages: Iterable[MessageParam | dict[str, Any]],
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> IngestResult:
        """Append up to 500 conversation messages and queue their extraction into memories. The
        result names the extraction job (``client.jobs.wait(result.job_id)``)."""
        payload = body(IngestParams, session_id=session_id, user_id=user_id, messages=list(messages))
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/events",
            json=payload,
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return self._call(req, IngestResult)


class Sessions(SyncAPIResource):
    def list(
        self, *, user_id: str | None = None, limit: int | None = None, namespace: str | None = None
    ) -> SyncPage[Session]:
        """Sessions with the most recent activity first."""
        req = APIRequest("GET", f"{self._ns(namespace)}/sessions", params=params(user_id=user_id, limit=limit))
        return self._page(req, Session)

    def get(self, session_id: str, *, namespace: str | None = None) -> Session:
        """One session: its user, first and last message times and message count."""
        return self._call(APIRequest("GET", f"{self._ns(namespace)}/sessions/{segment(session_id)}"), Session)

    def messages(
        self,
        session_id: str,
        *,
        order: Literal["asc", "desc"] | None = None,
        role: Role | Sequence[Role] | None = None,
        limit: int | None = None,
        namespace: str | None = None,
    ) -> SyncPage[Message]:
        """A session's messages in conversation order (``order="desc"``: newest first)."""
        query = params(order=order, role=[role] if isinstance(role, str) else role, limit=limit)
        req = APIRequest("GET", f"{self._ns(namespace)}/sessions/{segment(session_id)}/messages", params=query)
        return self._page(req, Message)


class AsyncEvents(AsyncAPIResource):
    async def ingest(
        self,
        messages: Iterable[MessageParam | dict[str, Any]],
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> IngestResult:
        """Append up to 500 conversation messages and queue their extraction into memories. The
        result names the extraction job (``client.jobs.wait(result.job_id)``)."""
        payload = body(IngestParams, session_id=session_id, user_id=user_id, messages=list(messages))
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/events",
            json=payload,
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return await self._call(req, IngestResult)


class AsyncSessions(AsyncAPIResource):
    def list(
        self, *, user_id: str | None = None, limit: int | None = None, namespace: str | None = None
    ) -> AsyncPaginator[Session]:
        """Sessions with the most recent activity first."""
        req = APIRequest("GET", f"{self._ns(namespace)}/sessions", params=params(user_id=user_id, limit=limit))
        return self._page(req, Session)

    async def get(self, session_id: str, *, namespace: str | None = None) -> Session:
        """One session: its user, first and last message times and message count."""
        return await self._call(APIRequest("GET", f"{self._ns(namespace)}/sessions/{segment(session_id)}"), Session)

    def messages(
        self,
        session_id: str,
        *,
        order: Literal["asc", "desc"] | None = None,
        role: Role | Sequence[Role] | None = None,
        limit: int | None = None,
        namespace: str | None = None,
    ) -> AsyncPaginator[Message]:
        """A session's messages in conversation order (``order="desc"``: newest first)."""
        query = params(order=order, role=[role] if isinstance(role, str) else role, limit=limit)
        req = APIRequest("GET", f"{self._ns(namespace)}/sessions/{segment(session_id)}/messages", params=query)
        return self._page(req, Message)
