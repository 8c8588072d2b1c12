from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from memvault_sdk._request import NOT_GIVEN, NOTHING, APIRequest, NotGiven, body, params, patch_body, returns, segment
from memvault_sdk.pagination import PageData
from memvault_sdk.resources._resource import APIResource, AsyncAPIResource, SyncAPIResource, endpoint, paginated
from memvault_sdk.types.entities import EntityLinks, MemoryEntities
from memvault_sdk.types.facts import Fact, FactCreate, PreferenceCreate
from memvault_sdk.types.memories import (
    Memory,
    MemoryBatch,
    MemoryBatchCreate,
    MemoryCreate,
    MemoryHistory,
    MemoryState,
    MemoryType,
    MemoryUpdate,
    ScopeLevel,
)


def _batch(memories: Iterable[MemoryCreate | dict[str, Any]]) -> MemoryBatchCreate:
    # Fields given as None are left out, as in `create`, so the server applies its defaults.
    items = [m.model_dump(exclude_none=True) if isinstance(m, MemoryCreate) else m for m in memories]
    return MemoryBatchCreate.model_validate({"memories": items})


class _Memories(APIResource):
    @endpoint
    def create(
        self,
        content: str,
        *,
        type: MemoryType | None = None,
        key: str | None = None,
        scope: ScopeLevel | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        entity_ids: Sequence[str] | None = None,
        source_event_ids: Sequence[str] | None = None,
        metadata: dict[str, Any] | None = None,
        importance: float | None = None,
        confidence: float | None = None,
        state: MemoryState | None = None,
        valid_from: datetime | None = None,
        valid_to: datetime | None = None,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> APIRequest[Memory]:
        """Store one memory. With a ``key``, a later memory of the same scope, owner, type and key
        supersedes this one instead of adding a second."""
        payload = body(
            MemoryCreate,
            content=content,
            type=type,
            key=key,
            scope=scope,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            entity_ids=list(entity_ids) if entity_ids is not None else None,
            source_event_ids=list(source_event_ids) if source_event_ids is not None else None,
            metadata=metadata,
            importance=importance,
            confidence=confidence,
            state=state,
            valid_from=valid_from,
            valid_to=valid_to,
        )
        path = f"{self._ns(namespace)}/memories"
        return APIRequest("POST", path, returns(Memory), body=payload, idempotency_key=idempotency_key)

    @endpoint
    def create_many(
        self,
        memories: Iterable[MemoryCreate | dict[str, Any]],
        *,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> APIRequest[builtins.list[Memory]]:
        """Store up to 1,000 memories in one request: all or nothing."""
        return APIRequest(
            "POST",
            f"{self._ns(namespace)}/memories/batch",
            returns(MemoryBatch).then(lambda batch: batch.memories),
            body=_batch(memories),
            idempotency_key=idempotency_key,
        )

    @endpoint
    def get(self, memory_id: str, *, namespace: str | None = None) -> APIRequest[Memory]:
        """One memory, any version."""
        return APIRequest("GET", f"{self._ns(namespace)}/memories/{segment(memory_id)}", returns(Memory))

    @paginated
    def list(
        self,
        *,
        type: MemoryType | Sequence[MemoryType] | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        state: MemoryState | Sequence[MemoryState] | None = None,
        scope: ScopeLevel | Sequence[ScopeLevel] | None = None,
        knowledge_at: datetime | None = None,
        valid_at: datetime | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        include_archived: bool | None = None,
        metadata: dict[str, Any] | None = None,
        limit: int | None = None,
        namespace: str | None = None,
    ) -> APIRequest[PageData[Memory]]:
        """Memories newest first; iterate the result to walk every page. With ``user_id`` and/or
        ``session_id`` the list reads through the scope chain as that user or session."""
        query = params(
            type=[type] if isinstance(type, str) else type,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            state=[state] if isinstance(state, str) else state,
            scope=[scope] if isinstance(scope, str) else scope,
            knowledge_at=knowledge_at,
            valid_at=valid_at,
            since=since,
            until=until,
            include_archived=include_archived,
            metadata=metadata,
            limit=limit,
        )
        return APIRequest("GET", f"{self._ns(namespace)}/memories", returns(PageData[Memory]), params=query)

    @endpoint
    def update(
        self,
        memory_id: str,
        *,
        content: str | NotGiven = NOT_GIVEN,
        type: MemoryType | NotGiven = NOT_GIVEN,
        key: str | NotGiven | None = NOT_GIVEN,
        user_id: str | NotGiven | None = NOT_GIVEN,
        agent_id: str | NotGiven | None = NOT_GIVEN,
        session_id: str | NotGiven | None = NOT_GIVEN,
        metadata: dict[str, Any] | NotGiven = NOT_GIVEN,
        importance: float | NotGiven = NOT_GIVEN,
        confidence: float | NotGiven = NOT_GIVEN,
        state: MemoryState | NotGiven = NOT_GIVEN,
        valid_from: datetime | NotGiven | None = NOT_GIVEN,
        valid_to: datetime | NotGiven | None = NOT_GIVEN,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> APIRequest[Memory]:
        """Change some fields of the current version; ``None`` clears an optional field."""
        payload = patch_body(
            MemoryUpdate,
            content=content,
            type=type,
            key=key,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            metadata=metadata,
            importance=importance,
            confidence=confidence,
            state=state,
            valid_from=valid_from,
            valid_to=valid_to,
        )
        path = f"{self._ns(namespace)}/memories/{segment(memory_id)}"
        return APIRequest("PATCH", path, returns(Memory), body=payload, idempotency_key=idempotency_key)

    @endpoint
    def delete(
        self, memory_id: str, *, namespace: str | None = None, idempotency_key: str | None = None
    ) -> APIRequest[None]:
        """Delete a memory for good: every version, its history and its entity links."""
        path = f"{self._ns(namespace)}/memories/{segment(memory_id)}"
        return APIRequest("DELETE", path, NOTHING, idempotency_key=idempotency_key)

    @endpoint
    def history(self, memory_id: str, *, namespace: str | None = None) -> APIRequest[MemoryHistory]:
        """Every version of the memory and every change, oldest first."""
        path = f"{self._ns(namespace)}/memories/{segment(memory_id)}/history"
        return APIRequest("GET", path, returns(MemoryHistory))

    @endpoint
    def promote(
        self, memory_id: str, *, namespace: str | None = None, idempotency_key: str | None = None
    ) -> APIRequest[Memory]:
        """Make a tentative (or archived) memory stable."""
        path = f"{self._ns(namespace)}/memories/{segment(memory_id)}/promote"
        return APIRequest("POST", path, returns(Memory), idempotency_key=idempotency_key)

    @endpoint
    def archive(
        self, memory_id: str, *, namespace: str | None = None, idempotency_key: str | None = None
    ) -> APIRequest[Memory]:
        """Keep a memory but take it out of search and lists."""
        path = f"{self._ns(namespace)}/memories/{segment(memory_id)}/archive"
        return APIRequest("POST", path, returns(Memory), idempotency_key=idempotency_key)

    @endpoint
    def link_entities(
        self,
        memory_id: str,
        entity_ids: Sequence[str],
        *,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> APIRequest[MemoryEntities]:
        """Link a memory to entities; answers with every entity it is now linked to."""
        return APIRequest(
            "POST",
            f"{self._ns(namespace)}/memories/{segment(memory_id)}/entities",
            returns(MemoryEntities),
            body=EntityLinks(entity_ids=[str(e) for e in entity_ids]),
            idempotency_key=idempotency_key,
        )

    @endpoint
    def unlink_entity(
        self, memory_id: str, entity_id: str, *, namespace: str | None = None, idempotency_key: str | None = None
    ) -> APIRequest[None]:
        """Remove the link between a memory and an entity; both stay."""
        path = f"{self._ns(namespace)}/memories/{segment(memory_id)}/entities/{segment(entity_id)}"
        return APIRequest("DELETE", path, NOTHING, idempotency_key=idempotency_key)

    @endpoint
    def add_preference(
        self,
        category: str,
        preference: str,
        *,
        context: str | None = None,
        confidence: float | None = None,
        scope: ScopeLevel | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> APIRequest[Memory]:
        """Store a preference as the memory keyed ``preference:<category>``: a later preference of
        the same category and owner supersedes it."""
        payload = body(
            PreferenceCreate,
            category=category,
            preference=preference,
            context=context,
            confidence=confidence,
            scope=scope,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
        )
        path = f"{self._ns(namespace)}/preferences"
        return APIRequest("POST", path, returns(Memory), body=payload, idempotency_key=idempotency_key)

    @endpoint
    def add_fact(
        self,
        subject: str,
        predicate: str,
        object: str,
        *,
        confidence: float | None = None,
        valid_from: datetime | None = None,
        valid_until: datetime | None = None,
        scope: ScopeLevel | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> APIRequest[Fact]:
        """Store a fact as the memory keyed ``fact:<subject>:<predicate>``: a later fact with the same
        subject, predicate and owner supersedes it. Between two known entities, a namespace-wide fact
        also records their relation (``relation``)."""
        payload = body(
            FactCreate,
            subject=subject,
            predicate=predicate,
            object=object,
            confidence=confidence,
            valid_from=valid_from,
            valid_until=valid_until,
            scope=scope,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
        )
        path = f"{self._ns(namespace)}/facts"
        return APIRequest("POST", path, returns(Fact), body=payload, idempotency_key=idempotency_key)


class Memories(_Memories, SyncAPIResource):
    pass


class AsyncMemories(_Memories, AsyncAPIResource):
    pass
