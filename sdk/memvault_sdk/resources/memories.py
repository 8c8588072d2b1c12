from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from memvault_sdk._base import NOT_GIVEN, APIRequest, NotGiven, body, params, patch_body, segment
from memvault_sdk.pagination import AsyncPaginator, SyncPage
from memvault_sdk.resources._resource import AsyncAPIResource, SyncAPIResource
from memvault_sdk.types.entities import MemoryEntities
from memvault_sdk.types.memories import (
    Memory,
    MemoryCreate,
    MemoryHistory,
    MemoryState,
    MemoryType,
    MemoryUpdate,
    ScopeLevel,
)


def _batch(memories: Iterable[MemoryCreate | dict[str, Any]]) -> dict[str, Any]:
    items = [m if isinstance(m, MemoryCreate) else MemoryCreate.model_validate(m) for m in memories]
    return {"memories": [m.model_dump(mode="json", exclude_none=True) for m in items]}


class Memories(SyncAPIResource):
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
    ) -> Memory:
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
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/memories",
            json=payload,
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return self._call(req, Memory)

    def create_many(
        self,
        memories: Iterable[MemoryCreate | dict[str, Any]],
        *,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> list[Memory]:
        """Store up to 1,000 memories in one request: all or nothing."""
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/memories/batch",
            json=_batch(memories),
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        out = self._call(req, dict[str, list[Memory]])
        return out["memories"]

    def get(self, memory_id: str, *, namespace: str | None = None) -> Memory:
        """One memory, any version."""
        return self._call(APIRequest("GET", f"{self._ns(namespace)}/memories/{segment(memory_id)}"), Memory)

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
    ) -> SyncPage[Memory]:
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
        return self._page(APIRequest("GET", f"{self._ns(namespace)}/memories", params=query), Memory)

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
    ) -> Memory:
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
        req = APIRequest("PATCH", f"{self._ns(namespace)}/memories/{segment(memory_id)}", json=payload)
        return self._call(req, Memory)

    def delete(self, memory_id: str, *, namespace: str | None = None) -> None:
        """Delete a memory for good: every version, its history and its entity links."""
        self._call(APIRequest("DELETE", f"{self._ns(namespace)}/memories/{segment(memory_id)}"), None)

    def history(self, memory_id: str, *, namespace: str | None = None) -> MemoryHistory:
        """Every version of the memory and every change, oldest first."""
        req = APIRequest("GET", f"{self._ns(namespace)}/memories/{segment(memory_id)}/history")
        return self._call(req, MemoryHistory)

    def promote(self, memory_id: str, *, namespace: str | None = None, idempotency_key: str | None = None) -> Memory:
        """Make a tentative (or archived) memory stable."""
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/memories/{segment(memory_id)}/promote",
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return self._call(req, Memory)

    def archive(self, memory_id: str, *, namespace: str | None = None, idempotency_key: str | None = None) -> Memory:
        """Keep a memory but take it out of search and lists."""
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/memories/{segment(memory_id)}/archive",
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return self._call(req, Memory)

    def link_entities(
        self,
        memory_id: str,
        entity_ids: Sequence[str],
        *,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> MemoryEntities:
        """Link a memory to entities; answers with every entity it is now linked to."""
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/memories/{segment(memory_id)}/entities",
            json={"entity_ids": [str(e) for e in entity_ids]},
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return self._call(req, MemoryEntities)

    def unlink_entity(self, memory_id: str, entity_id: str, *, namespace: str | None = None) -> None:
        """Remove the link between a memory and an entity; both stay."""
        path = f"{self._ns(namespace)}/memories/{segment(memory_id)}/entities/{segment(entity_id)}"
        self._call(APIRequest("DELETE", path), None)


class AsyncMemories(AsyncAPIResource):
    async def create(
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
    ) -> Memory:
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
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/memories",
            json=payload,
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return await self._call(req, Memory)

    async def create_many(
        self,
        memories: Iterable[MemoryCreate | dict[str, Any]],
        *,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> list[Memory]:
        """Store up to 1,000 memories in one request: all or nothing."""
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/memories/batch",
            json=_batch(memories),
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        out = await self._call(req, dict[str, list[Memory]])
        return out["memories"]

    async def get(self, memory_id: str, *, namespace: str | None = None) -> Memory:
        """One memory, any version."""
        return await self._call(APIRequest("GET", f"{self._ns(namespace)}/memories/{segment(memory_id)}"), Memory)

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
    ) -> AsyncPaginator[Memory]:
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
        return self._page(APIRequest("GET", f"{self._ns(namespace)}/memories", params=query), Memory)

    async def update(
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
    ) -> Memory:
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
        req = APIRequest("PATCH", f"{self._ns(namespace)}/memories/{segment(memory_id)}", json=payload)
        return await self._call(req, Memory)

    async def delete(self, memory_id: str, *, namespace: str | None = None) -> None:
        """Delete a memory for good: every version, its history and its entity links."""
        await self._call(APIRequest("DELETE", f"{self._ns(namespace)}/memories/{segment(memory_id)}"), None)

    async def history(self, memory_id: str, *, namespace: str | None = None) -> MemoryHistory:
        """Every version of the memory and every change, oldest first."""
        req = APIRequest("GET", f"{self._ns(namespace)}/memories/{segment(memory_id)}/history")
        return await self._call(req, MemoryHistory)

    async def promote(
        self, memory_id: str, *, namespace: str | None = None, idempotency_key: str | None = None
    ) -> Memory:
        """Make a tentative (or archived) memory stable."""
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/memories/{segment(memory_id)}/promote",
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return await self._call(req, Memory)

    async def archive(
        self, memory_id: str, *, namespace: str | None = None, idempotency_key: str | None = None
    ) -> Memory:
        """Keep a memory but take it out of search and lists."""
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/memories/{segment(memory_id)}/archive",
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return await self._call(req, Memory)

    async def link_entities(
        self,
        memory_id: str,
        entity_ids: Sequence[str],
        *,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> MemoryEntities:
        """Link a memory to entities; answers with every entity it is now linked to."""
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/memories/{segment(memory_id)}/entities",
            json={"entity_ids": [str(e) for e in entity_ids]},
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return await self._call(req, MemoryEntities)

    async def unlink_entity(self, memory_id: str, entity_id: str, *, namespace: str | None = None) -> None:
        """Remove the link between a memory and an entity; both stay."""
        path = f"{self._ns(namespace)}/memories/{segment(memory_id)}/entities/{segment(entity_id)}"
        await self._call(APIRequest("DELETE", path), None)
