"""MemVault and AsyncMemVault: the same resources and method names, blocking or awaitable."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from memvault_sdk._base import DEFAULT_MAX_RETRIES, AsyncAPIClient, SyncAPIClient
from memvault_sdk.resources import (
    Account,
    AsyncAccount,
    AsyncAudit,
    AsyncContradictions,
    AsyncEntities,
    AsyncEvents,
    AsyncJobs,
    AsyncKeys,
    AsyncMembers,
    AsyncMemories,
    AsyncNamespaces,
    AsyncPortability,
    AsyncRecall,
    AsyncRelations,
    AsyncSessions,
    AsyncTraces,
    AsyncWebhooks,
    Audit,
    Contradictions,
    Entities,
    Events,
    Jobs,
    Keys,
    Members,
    Memories,
    Namespaces,
    Portability,
    Recall,
    Relations,
    Sessions,
    Traces,
    Webhooks,
)


class MemVault(SyncAPIClient):
    """A blocking client.

    ``api_key`` defaults to ``MEMVAULT_API_KEY``, ``base_url`` to ``MEMVAULT_BASE_URL`` (else
    http://127.0.0.1:8080), ``namespace`` to ``MEMVAULT_NAMESPACE`` (else ``default``); every
    namespaced method also takes ``namespace=``. Failed requests are retried ``max_retries`` times
    when that is safe (connection errors, 429, 5xx), every write (POST, PATCH, DELETE) with one
    Idempotency-Key throughout, so the server answers a retry with the first attempt's outcome.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        namespace: str | None = None,
        timeout: float | httpx.Timeout | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        default_headers: Mapping[str, str] | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        super().__init__(
            api_key=api_key,
            base_url=base_url,
            namespace=namespace,
            timeout=timeout,
            max_retries=max_retries,
            default_headers=default_headers,
            http_client=http_client,
        )
        self.memories = Memories(self)
        self.events = Events(self)
        self.sessions = Sessions(self)
        self.entities = Entities(self)
        self.relations = Relations(self)
        self.contradictions = Contradictions(self)
        self.traces = Traces(self)
        self.namespaces = Namespaces(self)
        self.keys = Keys(self)
        self.audit = Audit(self)
        self.members = Members(self)
        self.jobs = Jobs(self)
        self.webhooks = Webhooks(self)
        self.account = Account(self)
        recall, portability = Recall(self), Portability(self)
        self.search = recall.search
        self.context = recall.context
        self.forget = portability.forget
        self.export = portability.export
        self.import_ = portability.import_
        self.status = portability.status
        self.revoke_grant = portability.revoke_grant

    def with_options(self, **overrides: Any) -> MemVault:
        """A client like this one with some options changed (e.g. ``namespace``, ``max_retries``,
        ``timeout``), sharing its connection pool."""
        return MemVault(**{**self._options(), **overrides}, http_client=self._http)


class AsyncMemVault(AsyncAPIClient):
    """An asyncio client with the same resources and methods as MemVault, awaited. List methods
    return a paginator: ``await`` it for the first page or ``async for`` over every item."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        namespace: str | None = None,
        timeout: float | httpx.Timeout | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        default_headers: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(
            api_key=api_key,
            base_url=base_url,
            namespace=namespace,
            timeout=timeout,
            max_retries=max_retries,
            default_headers=default_headers,
            http_client=http_client,
        )
        self.memories = AsyncMemories(self)
        self.events = AsyncEvents(self)
        self.sessions = AsyncSessions(self)
        self.entities = AsyncEntities(self)
        self.relations = AsyncRelations(self)
        self.contradictions = AsyncContradictions(self)
        self.traces = AsyncTraces(self)
        self.namespaces = AsyncNamespaces(self)
        self.keys = AsyncKeys(self)
        self.audit = AsyncAudit(self)
        self.members = AsyncMembers(self)
        self.jobs = AsyncJobs(self)
        self.webhooks = AsyncWebhooks(self)
        self.account = AsyncAccount(self)
        recall, portability = AsyncRecall(self), AsyncPortability(self)
        self.search = recall.search
        self.context = recall.context
        self.forget = portability.forget
        self.export = portability.export
        self.import_ = portability.import_
        self.status = portability.status
        self.revoke_grant = portability.revoke_grant

    def with_options(self, **overrides: Any) -> AsyncMemVault:
        """A client like this one with some options changed, sharing its connection pool."""
        return AsyncMemVault(**{**self._options(), **overrides}, http_client=self._http)
