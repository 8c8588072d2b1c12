from __future__ import annotations

import json
import uuid
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

MAX_METADATA_BYTES = 16_384
MAX_BATCH = 1000


class MemoryType(StrEnum):
    fact = "fact"
    preference = "preference"
    decision = "decision"
    instruction = "instruction"
    task = "task"
    event = "event"
    procedure = "procedure"
    entity = "entity"
    summary = "summary"
    note = "note"


class MemoryState(StrEnum):
    tentative = "tentative"
    stable = "stable"
    archived = "archived"


def _metadata_size(v: dict[str, Any]) -> dict[str, Any]:
    if len(json.dumps(v, default=str)) > MAX_METADATA_BYTES:
        raise ValueError(f"metadata is larger than {MAX_METADATA_BYTES} bytes of JSON")
    return v


def _no_nul(v: str | None) -> str | None:
    # PostgreSQL text cannot hold NUL; refuse it here rather than fail in the database.
    if v is not None and "\x00" in v:
        raise ValueError("must not contain NUL characters")
    return v


Metadata = Annotated[dict[str, Any], AfterValidator(_metadata_size)]
OwnerId = Annotated[str | None, Field(default=None, min_length=1, max_length=200), AfterValidator(_no_nul)]
Key = Annotated[str | None, Field(default=None, min_length=1, max_length=200), AfterValidator(_no_nul)]
Content = Annotated[str, Field(min_length=1, max_length=32_000), AfterValidator(_no_nul)]


class _ValidRange(BaseModel):
    @model_validator(mode="after")
    def _range(self) -> _ValidRange:
        vf, vt = getattr(self, "valid_from", None), getattr(self, "valid_to", None)
        if vf is not None and vt is not None and vt < vf:
            raise ValueError("valid_to must not be before valid_from")
        return self


class MemoryIn(_ValidRange):
    model_config = ConfigDict(extra="forbid")

    content: Content
    type: MemoryType = MemoryType.fact
    key: Key = None
    user_id: OwnerId = None
    agent_id: OwnerId = None
    session_id: OwnerId = None
    metadata: Metadata = Field(default_factory=dict)
    importance: float = Field(default=0.5, ge=0, le=1)
    confidence: float = Field(default=1.0, ge=0, le=1)
    state: MemoryState = MemoryState.stable
    valid_from: datetime | None = None
    valid_to: datetime | None = None


class MemoryPatch(_ValidRange):
    """Fields to change; omitted fields stay as they are, and null clears an optional field."""

    model_config = ConfigDict(extra="forbid")

    content: Content | None = None
    type: MemoryType | None = None
    key: Key = None
    user_id: OwnerId = None
    agent_id: OwnerId = None
    session_id: OwnerId = None
    metadata: Metadata | None = None
    importance: float | None = Field(default=None, ge=0, le=1)
    confidence: float | None = Field(default=None, ge=0, le=1)
    state: MemoryState | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None

    @model_validator(mode="after")
    def _required_not_null(self) -> MemoryPatch:
        for name in ("content", "type", "metadata", "importance", "confidence", "state"):
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"{name} cannot be null")
        if not self.model_fields_set:
            raise ValueError("nothing to update")
        return self


class MemoryBatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memories: list[MemoryIn] = Field(min_length=1, max_length=MAX_BATCH)


class MemoryOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    namespace: str
    type: MemoryType
    key: str | None
    content: str
    user_id: str | None
    agent_id: str | None
    session_id: str | None
    scope: str
    metadata: dict[str, Any]
    importance: float
    confidence: float
    state: MemoryState
    valid_from: datetime | None
    valid_to: datetime | None
    recorded_at: datetime
    superseded_at: datetime | None
    superseded_by: uuid.UUID | None
    embedding_model: str | None
    content_hash: str
    access_count: int
    last_accessed_at: datetime | None
    created_by: str
    created_at: datetime
    updated_at: datetime


class MemoryBatchOut(BaseModel):
    memories: list[MemoryOut]


class MemoryFilters(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: list[MemoryType] | None = None
    user_id: str | None = Field(default=None, max_length=200)
    agent_id: str | None = Field(default=None, max_length=200)
    session_id: str | None = Field(default=None, max_length=200)
    state: list[MemoryState] | None = Field(
        default=None, description="Lifecycle states to include; default excludes archived."
    )
    metadata: dict[str, Any] | None = Field(default=None, description="Exact match on these metadata keys.")


class MemoryPage(BaseModel):
    data: list[MemoryOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")
