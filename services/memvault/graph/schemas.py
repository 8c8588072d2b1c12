"""What the graph queries answer: entity lookups, a drawable export, paths and related entities."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from memvault.entities.schemas import EntityOut, RelationOut

MAX_PATH_DEPTH = 4
MAX_PATHS = 50
MAX_EXPORT = 1000
MAX_RELATED = 200

Direction = Literal["out", "in", "both"]


class EntityMatches(BaseModel):
    name: str = Field(description="The name looked up.")
    data: list[EntityOut] = Field(description="Entities of that name first, then those with it as an alias.")


class GraphNode(BaseModel):
    id: uuid.UUID
    kind: Literal["entity", "memory"]
    label: str = Field(description="An entity's name; a memory's content (cut at 200 characters).")
    type: str = Field(description="The entity type (person, ...) or the memory type (fact, ...).")
    created_at: datetime


class GraphEdge(BaseModel):
    id: str = Field(description="A relation's id; `<memory id>:<entity id>` for a memory's link to an entity.")
    kind: Literal["relation", "mention"]
    source: uuid.UUID
    target: uuid.UUID
    label: str = Field(description="The relation type (works_at), or `mentions` from a memory to an entity.")
    valid_from: datetime | None = None
    valid_to: datetime | None = None


class GraphExport(BaseModel):
    namespace: str
    of: Literal["namespace", "user", "session"] = Field(
        description="Whose graph: the namespace's shared memories, or one user's or session's own memories."
    )
    user_id: str | None
    session_id: str | None
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    counts: dict[str, int] = Field(description="Entities, memories, relations and mentions in this answer.")
    truncated: bool = Field(description="True when the graph was larger than `limit` (or 1,000 relations).")
    note: str | None = Field(default=None, description="What was left out, when something was.")


class GraphPath(BaseModel):
    length: int = Field(description="How many relations the path follows.")
    entities: list[uuid.UUID] = Field(description="Entity ids along the path, source first.")
    relations: list[uuid.UUID] = Field(description="Relation ids along the path, in order.")
    text: str = Field(description="The path to read: `Ana -[works_at]-> Acme <-[employs]- Bob`.")


class PathsOut(BaseModel):
    source: EntityOut
    target: EntityOut
    max_depth: int
    paths: list[GraphPath] = Field(description="Shortest first; each entity at most once per path.")
    entities: list[EntityOut] = Field(description="Every entity on a path.")
    relations: list[RelationOut] = Field(description="Every relation on a path.")
    truncated: bool = Field(description="True when more paths (or a denser neighbourhood) were left out.")


class RelatedEntity(BaseModel):
    entity: EntityOut
    relation: RelationOut
    direction: Literal["out", "in"] = Field(
        description="`out`: the asked-about entity is the relation's source; `in`: its target."
    )


class RelatedOut(BaseModel):
    entity: EntityOut = Field(description="The entity asked about.")
    data: list[RelatedEntity] = Field(description="Directly related entities, by name.")
    truncated: bool


class MemoryGraph(BaseModel):
    """A memory's entities and the graph one relation around them."""

    memory_id: uuid.UUID
    entities: list[EntityOut] = Field(description="The entities the memory is linked to.")
    neighbours: list[EntityOut] = Field(description="Entities one relation away from those, not linked themselves.")
    relations: list[RelationOut] = Field(description="Relations with an end among the memory's entities, newest first.")
    truncated: bool = Field(description="True when more entities or relations were left out.")
