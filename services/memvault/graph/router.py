"""REST for the read-only graph queries: lookup by name, paths, related entities, export."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import AfterValidator

from memvault.entities.router import ValidAt
from memvault.entities.schemas import EntityType, RelationType
from memvault.gateway.deps import Api, ReadPrincipal
from memvault.graph.schemas import (
    MAX_EXPORT,
    MAX_PATH_DEPTH,
    MAX_PATHS,
    MAX_RELATED,
    Direction,
    EntityMatches,
    GraphExport,
    PathsOut,
    RelatedOut,
)
from memvault.memories.schemas import no_nul
from memvault.namespaces.router import NamespaceName

router = APIRouter(prefix="/v1/namespaces/{ns}/graph", tags=["entities"])

EntityRef = Annotated[
    str,
    Query(min_length=1, max_length=200, description="An entity id, or its name or alias (any case)."),
    AfterValidator(no_nul),
]
Owner = Annotated[str | None, Query(min_length=1, max_length=200), AfterValidator(no_nul)]


@router.get("/entities")
async def find_entities(
    ns: NamespaceName,
    p: ReadPrincipal,
    api: Api,
    name: Annotated[
        str, Query(min_length=1, max_length=200, description="A name or alias, any case."), AfterValidator(no_nul)
    ],
    type: EntityType | None = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
) -> EntityMatches:
    """Entities whose name, or one of whose aliases, is `name` (ignoring case); name matches first."""
    return await api.find_entities(p, ns, name, type=type, limit=limit)


@router.get("/paths")
async def graph_paths(
    ns: NamespaceName,
    p: ReadPrincipal,
    api: Api,
    source: EntityRef,
    target: EntityRef,
    max_depth: Annotated[int, Query(ge=1, le=MAX_PATH_DEPTH, description="Most relations in a path.")] = 3,
    limit: Annotated[int, Query(ge=1, le=MAX_PATHS)] = 10,
    valid_at: ValidAt = None,
) -> PathsOut:
    """Paths between two entities through their relations (in either direction), shortest first."""
    return await api.graph_paths(p, ns, source, target, max_depth=max_depth, limit=limit, valid_at=valid_at)


@router.get("/related")
async def related_entities(
    ns: NamespaceName,
    p: ReadPrincipal,
    api: Api,
    entity: EntityRef,
    type: Annotated[EntityType | None, Query(description="Only related entities of this type.")] = None,
    relation: Annotated[RelationType | None, Query(description="Only through this relation type.")] = None,
    direction: Annotated[Direction, Query(description="`out`: entity --relation--> other; `in`: the reverse.")] = (
        "both"
    ),
    valid_at: ValidAt = None,
    limit: Annotated[int, Query(ge=1, le=MAX_RELATED)] = 50,
) -> RelatedOut:
    """The entities directly related to one, with the relation that links them."""
    return await api.related_entities(
        p, ns, entity, type=type, relation=relation, direction=direction, valid_at=valid_at, limit=limit
    )


@router.get("")
async def export_graph(
    ns: NamespaceName,
    p: ReadPrincipal,
    api: Api,
    user_id: Owner = None,
    session_id: Owner = None,
    limit: Annotated[int, Query(ge=1, le=MAX_EXPORT, description="Most entities, and most memories.")] = 200,
) -> GraphExport:
    """The entity graph of the namespace, or of one user's or session's memories, as nodes
    (entities and memories) and edges (relations and mentions) to draw."""
    return await api.export_graph(p, ns, user_id=user_id, session_id=session_id, limit=limit)
