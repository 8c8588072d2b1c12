from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memvault_sdk._request import NOT_GIVEN, NOTHING, APIRequest, NotGiven, body, params, patch_body, returns, segment
from memvault_sdk.pagination import PageData
from memvault_sdk.resources._resource import APIResource, AsyncAPIResource, SyncAPIResource, endpoint, paginated
from memvault_sdk.types.entities import (
    Entity,
    EntityCreate,
    EntityGraph,
    EntityType,
    EntityUpdate,
    Relation,
    RelationCreate,
)


class _Entities(APIResource):
    @endpoint
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
    ) -> APIRequest[Entity]:
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
        return APIRequest(
            "POST",
            f"{self._ns(namespace)}/entities",
            returns(Entity),
            params=params(upsert=True) if upsert else None,
            body=payload,
            idempotency_key=idempotency_key,
        )

    @paginated
    def list(
        self,
        *,
        type: EntityType | None = None,
        q: str | None = None,
        limit: int | None = None,
        namespace: str | None = None,
    ) -> APIRequest[PageData[Entity]]:
        """Entities newest first; ``q`` matches part of a name or alias, any case."""
        query = params(type=type, q=q, limit=limit)
        return APIRequest("GET", f"{self._ns(namespace)}/entities", returns(PageData[Entity]), params=query)

    @endpoint
    def get(
        self,
        entity_id: str,
        *,
        hops: int | None = None,
        valid_at: datetime | None = None,
        namespace: str | None = None,
    ) -> APIRequest[EntityGraph]:
        """An entity with its neighbours up to ``hops`` relations away and its linked memories."""
        path = f"{self._ns(namespace)}/entities/{segment(entity_id)}"
        return APIRequest("GET", path, returns(EntityGraph), params=params(hops=hops, valid_at=valid_at))

    @endpoint
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
        idempotency_key: str | None = None,
    ) -> APIRequest[Entity]:
        """Change some fields of an entity; aliases and metadata are replaced."""
        payload = patch_body(
            EntityUpdate,
            name=name,
            type=type,
            aliases=list(aliases) if not isinstance(aliases, NotGiven) else aliases,
            description=description,
            metadata=metadata,
        )
        path = f"{self._ns(namespace)}/entities/{segment(entity_id)}"
        return APIRequest("PATCH", path, returns(Entity), body=payload, idempotency_key=idempotency_key)

    @endpoint
    def delete(
        self, entity_id: str, *, namespace: str | None = None, idempotency_key: str | None = None
    ) -> APIRequest[None]:
        """Delete an entity with its relations and memory links; the memories stay."""
        path = f"{self._ns(namespace)}/entities/{segment(entity_id)}"
        return APIRequest("DELETE", path, NOTHING, idempotency_key=idempotency_key)


class _Relations(APIResource):
    @endpoint
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
    ) -> APIRequest[Relation]:
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
        path = f"{self._ns(namespace)}/relations"
        return APIRequest("POST", path, returns(Relation), body=payload, idempotency_key=idempotency_key)

    @paginated
    def list(
        self,
        *,
        entity_id: str | None = None,
        type: str | None = None,
        valid_at: datetime | None = None,
        limit: int | None = None,
        namespace: str | None = None,
    ) -> APIRequest[PageData[Relation]]:
        """Relations newest first; ``entity_id`` keeps those with that entity at either end."""
        query = params(entity_id=entity_id, type=type, valid_at=valid_at, limit=limit)
        return APIRequest("GET", f"{self._ns(namespace)}/relations", returns(PageData[Relation]), params=query)

    @endpoint
    def delete(
        self, relation_id: str, *, namespace: str | None = None, idempotency_key: str | None = None
    ) -> APIRequest[None]:
        """Delete a relation; the entities stay."""
        path = f"{self._ns(namespace)}/relations/{segment(relation_id)}"
        return APIRequest("DELETE", path, NOTHING, idempotency_key=idempotency_key)


class Entities(_Entities, SyncAPIResource):
    pass


class AsyncEntities(_Entities, AsyncAPIResource):
    pass


class Relations(_Relations, SyncAPIResource):
    pass


class AsyncRelations(_Relations, AsyncAPIResource):
    pass
