from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Response
from pydantic import AfterValidator

from memvault.entities.schemas import (
    MAX_HOPS,
    EntityGraph,
    EntityIn,
    EntityOut,
    EntityPage,
    EntityPatch,
    EntityType,
    LinkIn,
    MemoryEntities,
    RelationIn,
    RelationOut,
    RelationPage,
    RelationType,
)
from memvault.gateway.deps import Api, ReadPrincipal, WritePrincipal
from memvault.gateway.idempotency import IDEMPOTENT
from memvault.memories.schemas import Timestamp, no_nul
from memvault.namespaces.router import NamespaceName

router = APIRouter(prefix="/v1/namespaces/{ns}", tags=["entities"])

ValidAt = Annotated[
    Timestamp,
    Query(description="Only relations valid at this time (ISO 8601; without an offset, UTC)."),
]
Limit = Annotated[int, Query(ge=1, le=200)]
Cursor = Annotated[str | None, Query(max_length=500)]


@router.post(
    "/entities",
    status_code=201,
    responses={200: {"description": "Merged into an existing entity."}},
    dependencies=[IDEMPOTENT],
)
async def create_entity(
    ns: NamespaceName,
    body: EntityIn,
    p: WritePrincipal,
    api: Api,
    response: Response,
    upsert: Annotated[
        bool, Query(description="Merge into an existing entity of the same type and name instead of a 409.")
    ] = False,
) -> EntityOut:
    """Create an entity (a person, organization, place, ...). A second entity with the same type
    and name (ignoring case) is a 409 `entity_exists` carrying `existing_id`; with `upsert=true`
    its aliases, description and metadata are merged into the existing one instead (200)."""
    if not upsert:
        return await api.create_entity(p, ns, body)
    entity, created = await api.upsert_entity(p, ns, body)
    response.status_code = 201 if created else 200
    return entity


@router.get("/entities")
async def list_entities(
    ns: NamespaceName,
    p: ReadPrincipal,
    api: Api,
    type: EntityType | None = None,
    q: Annotated[
        str | None,
        Query(min_length=1, max_length=200, description="Part of the name or of an alias, any case."),
        AfterValidator(no_nul),
    ] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> EntityPage:
    """List entities newest first; follow `next_cursor` for more."""
    return await api.list_entities(p, ns, type=type, q=q, limit=limit, cursor=cursor)


@router.get("/entities/{entity_id}")
async def get_entity(
    ns: NamespaceName,
    entity_id: uuid.UUID,
    p: ReadPrincipal,
    api: Api,
    hops: Annotated[int, Query(ge=0, le=MAX_HOPS, description="How many relations away to look (0-3).")] = 1,
    valid_at: ValidAt = None,
) -> EntityGraph:
    """An entity with its neighbours up to `hops` relations away (in either direction, each with
    its distance and path), the relations among them, and the current memories linked to it."""
    return await api.get_entity(p, ns, entity_id, hops=hops, valid_at=valid_at)


@router.patch("/entities/{entity_id}", dependencies=[IDEMPOTENT])
async def update_entity(
    ns: NamespaceName, entity_id: uuid.UUID, body: EntityPatch, p: WritePrincipal, api: Api
) -> EntityOut:
    """Change some fields of an entity; aliases and metadata are replaced."""
    return await api.update_entity(p, ns, entity_id, body)


@router.delete("/entities/{entity_id}", status_code=204, dependencies=[IDEMPOTENT])
async def delete_entity(ns: NamespaceName, entity_id: uuid.UUID, p: WritePrincipal, api: Api) -> Response:
    """Delete an entity, its relations and its memory links. The memories stay."""
    await api.delete_entity(p, ns, entity_id)
    return Response(status_code=204)


@router.post("/relations", status_code=201, dependencies=[IDEMPOTENT])
async def create_relation(ns: NamespaceName, body: RelationIn, p: WritePrincipal, api: Api) -> RelationOut:
    """Relate two entities of the namespace: source --type--> target, e.g. `works_at`."""
    return await api.create_relation(p, ns, body)


@router.get("/relations")
async def list_relations(
    ns: NamespaceName,
    p: ReadPrincipal,
    api: Api,
    entity_id: Annotated[uuid.UUID | None, Query(description="Relations with this entity at either end.")] = None,
    type: Annotated[RelationType | None, Query()] = None,
    valid_at: ValidAt = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> RelationPage:
    """List relations newest first; follow `next_cursor` for more."""
    return await api.list_relations(
        p, ns, entity_id=entity_id, type=type, valid_at=valid_at, limit=limit, cursor=cursor
    )


@router.delete("/relations/{relation_id}", status_code=204, dependencies=[IDEMPOTENT])
async def delete_relation(ns: NamespaceName, relation_id: uuid.UUID, p: WritePrincipal, api: Api) -> Response:
    """Delete a relation; the entities stay."""
    await api.delete_relation(p, ns, relation_id)
    return Response(status_code=204)


@router.post("/memories/{memory_id}/entities", dependencies=[IDEMPOTENT])
async def link_entities(
    ns: NamespaceName, memory_id: uuid.UUID, body: LinkIn, p: WritePrincipal, api: Api
) -> MemoryEntities:
    """Link a memory to entities of the same namespace (linking twice is harmless); answers with
    every entity the memory is now linked to."""
    return await api.link_entities(p, ns, memory_id, body.entity_ids)


@router.delete("/memories/{memory_id}/entities/{entity_id}", status_code=204, dependencies=[IDEMPOTENT])
async def unlink_entity(
    ns: NamespaceName, memory_id: uuid.UUID, entity_id: uuid.UUID, p: WritePrincipal, api: Api
) -> Response:
    """Remove the link between a memory and an entity; both stay."""
    await api.unlink_entity(p, ns, memory_id, entity_id)
    return Response(status_code=204)
