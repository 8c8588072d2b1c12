from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from memvault_sdk.types._model import Model, Params

EntityType = Literal["person", "organization", "location", "object", "event", "concept", "other"]


class EntityCreate(Params):
    name: str
    type: EntityType | None = None
    aliases: list[str] | None = None
    description: str | None = None
    metadata: dict[str, Any] | None = None


class EntityUpdate(Params):
    name: str | None = None
    type: EntityType | None = None
    aliases: list[str] | None = None
    description: str | None = None
    metadata: dict[str, Any] | None = None


class EntityLinks(Params):
    entity_ids: list[str]


class RelationCreate(Params):
    source_id: str
    type: str
    target_id: str
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    confidence: float | None = None
    metadata: dict[str, Any] | None = None


class Entity(Model):
    id: str
    namespace: str
    name: str
    type: str
    aliases: list[str] = Field(default_factory=list)
    description: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_by: str
    created_at: datetime
    updated_at: datetime


class Relation(Model):
    id: str
    namespace: str
    source_id: str
    type: str
    target_id: str
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    confidence: float
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_by: str
    created_at: datetime


class Neighbour(Model):
    entity: Entity
    distance: int
    path: list[str]
    relation_path: list[str]


class LinkedMemory(Model):
    id: str
    type: str
    content: str
    created_at: datetime


class EntityGraph(Model):
    entity: Entity
    hops: int
    valid_at: datetime | None = None
    neighbours: list[Neighbour]
    relations: list[Relation]
    memories: list[LinkedMemory]
    truncated: bool


class MemoryEntities(Model):
    memory_id: str
    entities: list[Entity]
