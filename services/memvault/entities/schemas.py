from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from memvault.fields import Body, UnitFloat
from memvault.memories.schemas import MemoryType, Metadata, Timestamp, no_nul

MAX_ALIASES = 50
MAX_HOPS = 3
MAX_LINKS = 100
# A relation type is a short snake_case verb phrase: works_at, sister_of, located_in. Other
# servers (and the models trained on them) write WORKS_AT; either case is accepted and stored lower.
RELATION_TYPE = r"^[A-Za-z][A-Za-z0-9_]{0,62}$"


class EntityType(StrEnum):
    person = "person"
    organization = "organization"
    location = "location"
    object = "object"
    event = "event"
    concept = "concept"
    other = "other"


def _trimmed(v: str) -> str:
    # Names are compared case-insensitively in a unique index; stray spaces would defeat it.
    v = v.strip()
    if not v:
        raise ValueError("must not be blank")
    return v


def _distinct(v: list[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for alias in v:
        if alias.lower() not in seen:
            seen.add(alias.lower())
            out.append(alias)
    return out


Name = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(no_nul), AfterValidator(_trimmed)]
Aliases = Annotated[list[Name], Field(max_length=MAX_ALIASES), AfterValidator(_distinct)]
Description = Annotated[str | None, Field(default=None, max_length=4000), AfterValidator(no_nul)]


def relation_type(v: str) -> str:
    """The one place a relation type is normalised: `WORKS_AT` and `works_at` are the same type."""
    return v.lower()


RelationType = Annotated[
    str,
    Field(pattern=RELATION_TYPE, description="snake_case verb, e.g. works_at (WORKS_AT is the same)."),
    AfterValidator(relation_type),
]


class EntityIn(Body):
    model_config = ConfigDict(extra="forbid")

    name: Name
    type: EntityType = EntityType.other
    aliases: Aliases = Field(default_factory=list, description="Other names; matched by `q` like the name.")
    description: Description = None
    metadata: Metadata = Field(default_factory=dict)


class EntityPatch(Body):
    """Fields to change; omitted fields stay as they are. Aliases and metadata are replaced."""

    model_config = ConfigDict(extra="forbid")

    name: Name | None = None
    type: EntityType | None = None
    aliases: Aliases | None = None
    description: Description = None
    metadata: Metadata | None = None

    @field_validator("name", "type", "aliases", "metadata", mode="before")
    @classmethod
    def _required_not_null(cls, v: Any) -> Any:
        if v is None:
            raise ValueError("cannot be null")
        return v

    @model_validator(mode="after")
    def _not_empty(self) -> EntityPatch:
        if not self.model_fields_set:
            raise ValueError("nothing to update")
        return self


class EntityOut(BaseModel):
    id: uuid.UUID
    namespace: str
    name: str
    type: EntityType
    aliases: list[str]
    description: str | None
    metadata: dict[str, Any]
    created_by: str
    created_at: datetime
    updated_at: datetime


class EntityPage(BaseModel):
    data: list[EntityOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class RelationIn(Body):
    model_config = ConfigDict(extra="forbid")

    source_id: uuid.UUID
    type: RelationType
    target_id: uuid.UUID
    valid_from: Timestamp = None
    valid_to: Timestamp = None
    confidence: UnitFloat = 1.0
    metadata: Metadata = Field(default_factory=dict)

    # Field validators rather than one model validator, so the problem names the field at fault.
    @field_validator("target_id")
    @classmethod
    def _not_self(cls, v: uuid.UUID, info: ValidationInfo) -> uuid.UUID:
        if v == info.data.get("source_id"):
            raise ValueError("an entity cannot be related to itself")
        return v

    @field_validator("valid_to")
    @classmethod
    def _range(cls, v: datetime | None, info: ValidationInfo) -> datetime | None:
        start = info.data.get("valid_from")
        if v is not None and start is not None and v < start:
            raise ValueError("valid_to must not be before valid_from")
        return v


class RelationOut(BaseModel):
    id: uuid.UUID
    namespace: str
    source_id: uuid.UUID
    type: str
    target_id: uuid.UUID
    valid_from: datetime | None
    valid_to: datetime | None
    confidence: float
    metadata: dict[str, Any]
    created_by: str
    created_at: datetime


class RelationPage(BaseModel):
    data: list[RelationOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class Neighbour(BaseModel):
    entity: EntityOut
    distance: int = Field(description="Fewest relations between the requested entity and this one (1-3).")
    path: list[uuid.UUID] = Field(description="Entity ids along one shortest path, requested entity first.")
    relation_path: list[uuid.UUID] = Field(description="Relation ids along that path, in order.")


class LinkedMemory(BaseModel):
    id: uuid.UUID
    type: MemoryType
    content: str
    created_at: datetime


class EntityGraph(BaseModel):
    entity: EntityOut
    hops: int
    valid_at: datetime | None = Field(description="Only relations valid at this time were followed, when set.")
    neighbours: list[Neighbour] = Field(description="Nearest first.")
    relations: list[RelationOut] = Field(description="Every relation among the entity and its neighbours.")
    memories: list[LinkedMemory] = Field(description="Current memories linked to the entity, newest first (≤ 50).")
    truncated: bool = Field(
        description="True when the neighbourhood was larger than one answer holds (500 neighbours, 1,000 relations)."
    )


class LinkIn(Body):
    model_config = ConfigDict(extra="forbid")

    entity_ids: list[uuid.UUID] = Field(min_length=1, max_length=MAX_LINKS)


class MemoryEntities(BaseModel):
    memory_id: uuid.UUID
    entities: list[EntityOut] = Field(description="Every entity the memory is now linked to.")
