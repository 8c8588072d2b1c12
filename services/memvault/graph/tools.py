"""MCP tools for questions about the entity graph: who is called what, how two entities are
connected, what is related to one, and the whole graph to draw. All read-only."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from memvault.entities.schemas import EntityType, RelationType
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
from memvault.mcp.runtime import Runtime
from memvault.mcp.tool import ToolCall, Tools
from memvault.memories.tools import READ, Namespace, SessionId, UserId

EntityRef = Annotated[str, Field(min_length=1, max_length=200, description="An entity id, or its name or alias.")]
ValidAt = Annotated[datetime | None, Field(description="Only relations true at this time.")]


def register(server: MCPServer, rt: Runtime, *, extended: bool) -> None:
    tool = Tools(server, rt)
    if not extended:
        return

    @tool(
        name="memory_find_entity",
        title="Find an entity by name",
        annotations=READ,
        description=(
            "Look up the entities called `name` (their name or an alias, any case), to get an entity's id "
            "before entity_get, entity_relate or a search filtered by entity. Empty when none is known."
        ),
    )
    async def memory_find_entity(
        call: ToolCall,
        name: Annotated[str, Field(min_length=1, max_length=200, description="A name or alias.")],
        type: Annotated[EntityType | None, Field(description="Only entities of this type.")] = None,
        namespace: Namespace = None,
    ) -> EntityMatches:
        return await call.api.find_entities(call.p, call.ns(namespace), name, type=type)

    @tool(
        name="entity_paths",
        title="How two entities are connected",
        annotations=READ,
        description=(
            "Paths between two entities through their relations (either direction), shortest first, each also "
            "written out (`Ana -[works_at]-> Acme <-[employs]- Bob`). Use it for `how does X know Y?`."
        ),
    )
    async def entity_paths(
        call: ToolCall,
        source: EntityRef,
        target: EntityRef,
        max_depth: Annotated[int, Field(ge=1, le=MAX_PATH_DEPTH, description="Most relations in a path.")] = 3,
        limit: Annotated[int, Field(ge=1, le=MAX_PATHS)] = 10,
        valid_at: ValidAt = None,
        namespace: Namespace = None,
    ) -> PathsOut:
        return await call.api.graph_paths(
            call.p, call.ns(namespace), source, target, max_depth=max_depth, limit=limit, valid_at=valid_at
        )

    @tool(
        name="entity_related",
        title="Entities related to one",
        annotations=READ,
        description=(
            "The entities directly related to an entity, optionally only of one type, through one relation type "
            "or in one direction, e.g. the organizations Ana `works_at` (type organization, relation works_at)."
        ),
    )
    async def entity_related(
        call: ToolCall,
        entity: EntityRef,
        type: Annotated[EntityType | None, Field(description="Only related entities of this type.")] = None,
        relation: Annotated[RelationType | None, Field(description="Only through this relation type.")] = None,
        direction: Annotated[
            Direction, Field(description="`out`: entity --relation--> other; `in`: the reverse; default both.")
        ] = "both",
        valid_at: ValidAt = None,
        limit: Annotated[int, Field(ge=1, le=MAX_RELATED)] = 50,
        namespace: Namespace = None,
    ) -> RelatedOut:
        return await call.api.related_entities(
            call.p,
            call.ns(namespace),
            entity,
            type=type,
            relation=relation,
            direction=direction,
            valid_at=valid_at,
            limit=limit,
        )

    @tool(
        name="memory_export_graph",
        title="Export the entity graph",
        annotations=READ,
        description=(
            "The entity graph as JSON nodes (entities, memories) and edges (relations, mentions) to draw or "
            "inspect: of a user or a session (their own memories and the entities they mention), or of the "
            "namespace (its entities and shared memories). Bounded by `limit`; `note` says what was left out."
        ),
    )
    async def memory_export_graph(
        call: ToolCall,
        user_id: UserId = None,
        session_id: SessionId = None,
        limit: Annotated[int, Field(ge=1, le=MAX_EXPORT, description="Most entities, and most memories.")] = 200,
        namespace: Namespace = None,
    ) -> GraphExport:
        return await call.api.export_graph(
            call.p, call.ns(namespace), user_id=user_id, session_id=session_id, limit=limit
        )
