"""MCP tools for the entity graph: people, organisations, places and how they relate."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from memvault.entities.schemas import EntityGraph, EntityIn, EntityOut, EntityType, RelationIn, RelationOut
from memvault.mcp.runtime import Runtime
from memvault.mcp.tool import ToolCall, Tools
from memvault.memories.tools import CHANGE, READ, WRITE, Namespace


def register(server: MCPServer, rt: Runtime, *, extended: bool) -> None:
    tool = Tools(server, rt)
    if not extended:
        return

    @tool(
        name="entity_add",
        title="Add or update an entity",
        annotations=CHANGE,
        description=(
            "Record a person, organization, location, object, event or concept that memories are about. If one "
            "with this type and name exists, its aliases and description are merged instead (safe to repeat)."
        ),
    )
    async def entity_add(
        call: ToolCall,
        name: Annotated[str, Field(min_length=1, max_length=200)],
        type: EntityType = EntityType.other,
        aliases: Annotated[list[str] | None, Field(description="Other names it goes by.")] = None,
        description: str | None = None,
        namespace: Namespace = None,
    ) -> EntityOut:
        body = EntityIn(name=name, type=type, aliases=aliases or [], description=description)
        entity, _created = await call.api.upsert_entity(call.p, call.ns(namespace), body)
        return entity

    @tool(
        name="entity_get",
        title="Entity and neighbours",
        annotations=READ,
        description=(
            "An entity with the entities related to it (up to `hops` relations away), those relations, and the "
            "memories that mention it. Use it to answer questions about a person or thing and its connections."
        ),
    )
    async def entity_get(
        call: ToolCall,
        entity_id: uuid.UUID,
        hops: Annotated[int, Field(ge=0, le=3)] = 1,
        valid_at: Annotated[datetime | None, Field(description="Only relations true at this time.")] = None,
        namespace: Namespace = None,
    ) -> EntityGraph:
        return await call.api.get_entity(call.p, call.ns(namespace), entity_id, hops=hops, valid_at=valid_at)

    @tool(
        name="entity_relate",
        title="Relate two entities",
        annotations=WRITE,
        description="Record a typed relation between two entities, e.g. `works_at`, `sister_of`, `located_in`.",
    )
    async def entity_relate(
        call: ToolCall,
        source_id: uuid.UUID,
        type: Annotated[str, Field(description="snake_case verb, e.g. works_at (WORKS_AT is the same).")],
        target_id: uuid.UUID,
        valid_from: datetime | None = None,
        valid_to: datetime | None = None,
        confidence: Annotated[float, Field(ge=0, le=1)] = 1.0,
        namespace: Namespace = None,
    ) -> RelationOut:
        body = RelationIn(
            source_id=source_id,
            type=type,
            target_id=target_id,
            valid_from=valid_from,
            valid_to=valid_to,
            confidence=confidence,
        )
        return await call.api.create_relation(call.p, call.ns(namespace), body)
