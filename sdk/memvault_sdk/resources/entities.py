from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memvault_sdk._base import NOT_GIVEN, APIRequest, NotGiven, body, params, patch_body, segment
from memvault_sdk.pagination import AsyncPaginator, SyncPage
from memvault_sdk.resources._resource import AsyncAPIResource, SyncAPIResource
from memvault_sdk.types.entities import (
    Entity,
    EntityCreate,
    EntityGraph,
    EntityType,
    EntityUpdate,
    Relation,
    RelationCreate,
)


class Entities(SyncAPIResource):
    def create(
        self,
        name: str,
        *,
        type: EntityType | None = None,
        aliases: Sequence[str] | None = None,
        description: str | None = None,
        metadata: dict[str, Any] | None = None,
        upsert: bool = False,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> Entity:
        """Create an entity. Another one with the same type and name is a ConflictError
        (``entity_exists``); with ``upsert=True`` it is merged into the existing one instead."""
        payload = body(
            EntityCreate,
            name=name,
            type=type,
            aliases=list(aliases) if aliases is not None else None,
            description=description,
            metadata=metadata,
        )
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/entities",
            params=params(upsert=True) if upsert else None,
            json=payload,
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return self._call(req, Entity)

    def list(
        self,
        *,
        type: EntityType | None = None,
        q: str | None = None,
        limit: int | None = None,
        namespace: str | None = None,
    ) -> SyncPage[Entity]:
        """Entities newest first; ``q`` matches part of a name or alias, any case."""
        req = APIRequest("GET", f"{self._ns(namespace)}/entities", params=params(type=type, q=q, limit=limit))
        return self._page(req, Entity)

    def get(
        self,
        entity_id: str,
        *,
        hops: int | None = None,
        valid_at: datetime | None = None,
        namespace: str | None = None,
    ) -> EntityGraph:
        """An entity with its neighbours up to ``hops`` relations away and its linked memories."""
        req = APIRequest(
            "GET",
            f"{self._ns(namespace)}/entities/{segment(entity_id)}",
            params=params(hops=hops, valid_at=valid_at),
        )
        return self._call(req, EntityGraph)

    def update(
        self,
        entity_id: str,
        *,
        name: str | NotGiven = NOT_GIVEN,
        type: EntityType | NotGiven = NOT_GIVEN,
        aliases: Sequence[str] | NotGiven = NOT_GIVEN,
        description: str | NotGiven | None = NOT_GIVEN,
        metadata: dict[str, Any] | NotGiven = NOT_GIVEN,
        namespace: str | None = None,
    ) -> Entity:
        """Change some fields of an entity; aliases and metadata are replaced."""
        payload = patch_body(
            EntityUpdate,
            name=name,
            type=type,
            aliases=list(aliases) if not isinstance(aliases, NotGiven) else aliases,
            description=description,
            metadata=metadata,
        )
        req = APIRequest("PATCH", f"{self._ns(namespace)}/entities/{segment(entity_id)}", json=payload)
        return self._call(req, Entity)

    def delete(self, entity_id: str, *, namespace: str | None = None) -> None:
        """Delete an entity with its relations and memory links; the memories stay."""
        self._call(APIRequest("DELETE", f"{self._ns(namespace)}/entities/{segment(entity_id)}"), None)


class Relations(SyncAPIResource):
    def create(
        self,
        source_id: str,
        type: str,
        target_id: str,
        *,
        valid_from: datetime | None = None,
        valid_to: datetime | None = None,
        confidence: float | None = None,
        metadata: dict[str, Any] | None = None,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> Relation:
        """Relate two entities: source --type--> target, e.g. ``works_at``."""
        payload = body(
            RelationCreate,
            source_id=str(source_id),
            type=type,
            target_id=str(target_id),
            valid_from=valid_from,
            valid_to=valid_to,
            confidence=confidence,
            metadata=metadata,
        )
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/relations",
            json=payload,
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return self._call(req, Relation)

    def list(
        self,
        *,
        entity_id: str | None = None,
        type: str | None = None,
        valid_at: datetime | None = None,
        limit: int | None = None,
        namespace: str | None = None,
    ) -> SyncPage[Relation]:
        """Relations newest first; ``entity_id`` keeps those with that entity at either end."""
        query = params(entity_id=entity_id, type=type, valid_at=valid_at, limit=limit)
        return self._page(APIRequest("GET", f"{self._ns(namespace)}/relations", params=query), Relation)

    def delete(self, relation_id: str, *, namespace: str | None = None) -> None:
        """Delete a relation; the entities stay."""
        self._call(APIRequest("DELETE", f"{self._ns(namespace)}/relations/{segment(relation_id)}"), None)


class AsyncEntities(AsyncAPIResource):
    async def create(
        self,
        name: str,
        *,
        type: EntityType | None = None,
        aliases: Sequence[str] | None = None,
        description: str | None = None,
        metadata: dict[str, Any] | None = None,
        upsert: bool = False,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> Entity:
        """Create an entity. Another one with the same type and name is a ConflictError
        (``entity_exists``); with ``upsert=True`` it is merged into the existing one instead."""
        payload = body(
            EntityCreate,
            name=name,
            type=type,
            aliases=list(aliases) if aliases is not None else None,
            description=description,
            metadata=metadata,
        )
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/entities",
            params=params(upsert=True) if upsert else None,
            json=payload,
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return await self._call(req, Entity)

    def list(
        self,
        *,
        type: EntityType | None = None,
        q: str | None = None,
        limit: int | None = None,
        namespace: str | None = None,
    ) -> AsyncPaginator[Entity]:
        """Entities newest first; ``q`` matches part of a name or alias, any case."""
        req = APIRequest("GET", f"{self._ns(namespace)}/entities", params=params(type=type, q=q, limit=limit))
        return self._page(req, Entity)

    async def get(
        self,
        entity_id: str,
        *,
        hops: int | None = None,
        valid_at: datetime | None = None,
        namespace: str | None = None,
    ) -> EntityGraph:
        """An entity with its neighbours up to ``hops`` relations away and its linked memories."""
        req = APIRequest(
            "GET",
            f"{self._ns(namespace)}/entities/{segment(entity_id)}",
            params=params(hops=hops, valid_at=valid_at),
        )
        return await self._call(req, EntityGraph)

    async def update(
        self,
        entity_id: str,
        *,
        name: str | NotGiven = NOT_GIVEN,
        type: EntityType | NotGiven = NOT_GIVEN,
        aliases: Sequence[str] | NotGiven = NOT_GIVEN,
        description: str | NotGiven | None = NOT_GIVEN,
        metadata: dict[str, Any] | NotGiven = NOT_GIVEN,
        namespace: str | None = None,
    ) -> Entity:
        """Change some fields of an entity; aliases and metadata are replaced."""
        payload = patch_body(
            EntityUpdate,
            name=name,
            type=type,
            aliases=list(aliases) if not isinstance(aliases, NotGiven) else aliases,
            description=description,
            metadata=metadata,
        )
        req = APIRequest("PATCH", f"{self._ns(namespace)}/entities/{segment(entity_id)}", json=payload)
        return await self._call(req, Entity)

    async def delete(self, entity_id: str, *, namespace: str | None = None) -> None:
        """Delete an entity with its relations and memory links; the memories stay."""
        await self._call(APIRequest("DELETE", f"{self._ns(namespace)}/entities/{segment(entity_id)}"), None)


class AsyncRelations(AsyncAPIResource):
    async def create(
        self,
        source_id: str,
        type: str,
        target_id: str,
        *,
        valid_from: datetime | None = None,
        valid_to: datetime | None = None,
        confidence: float | None = None,
        metadata: dict[str, Any] | None = None,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> Relation:
        """Relate two entities: source --type--> target, e.g. ``works_at``."""
        payload = body(
            RelationCreate,
            source_id=str(source_id),
            type=type,
            target_id=str(target_id),
            valid_from=valid_from,
            valid_to=valid_to,
            confidence=confidence,
            metadata=metadata,
        )
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/relations",
            json=payload,
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return await self._call(req, Relation)

    def list(
        self,
        *,
        entity_id: str | None = None,
        type: str | None = None,
        valid_at: datetime | None = None,
        limit: int | None = None,
        namespace: str | None = None,
    ) -> AsyncPaginator[Relation]:
        """Relations newest first; ``entity_id`` keeps those with that entity at either end."""
        query = params(entity_id=entity_id, type=type, valid_at=valid_at, limit=limit)
        return self._page(APIRequest("GET", f"{self._ns(namespace)}/relations", params=query), Relation)

    async def delete(self, relation_id: str, *, namespace: str | None = None) -> None:
        """Delete a relation; the entities stay."""
        await self._call(APIRequest("DELETE", f"{self._ns(namespace)}/relations/{segment(relation_id)}"), None)
