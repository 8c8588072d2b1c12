from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from memvault.fields import Body
from memvault.memories.schemas import no_nul

Note = Annotated[str | None, Field(default=None, min_length=1, max_length=2000), AfterValidator(no_nul)]


class ContradictionState(StrEnum):
    open = "open"
    resolved = "resolved"


class Resolution(StrEnum):
    keep_one = "keep_one"
    keep_both = "keep_both"
    note = "note"


class ContradictionIn(Body):
    model_config = ConfigDict(extra="forbid")

    memory_id: uuid.UUID = Field(description="One of the two memories.")
    other_id: uuid.UUID = Field(description="The memory that contradicts it.")
    note: Note = Field(default=None, description="What the two disagree on.")

    @field_validator("other_id")
    @classmethod
    def _not_self(cls, v: uuid.UUID, info: ValidationInfo) -> uuid.UUID:
        if v == info.data.get("memory_id"):
            raise ValueError("a memory cannot contradict itself")
        return v


class ResolutionIn(Body):
    """How a contradiction ends. `keep_one` keeps `keep_id` and archives the other memory;
    `keep_both` and `note` change no memory (both may be right, e.g. at different times)."""

    model_config = ConfigDict(extra="forbid")

    resolution: Resolution
    keep_id: uuid.UUID | None = Field(default=None, description="With `keep_one`: the memory that stays.")
    note: Note = Field(default=None, description="Why; required with `note`.")

    @model_validator(mode="after")
    def _consistent(self) -> ResolutionIn:
        if self.resolution is Resolution.keep_one and self.keep_id is None:
            raise ValueError("keep_one needs keep_id: the memory that stays")
        if self.resolution is not Resolution.keep_one and self.keep_id is not None:
            raise ValueError("keep_id goes with keep_one only")
        if self.resolution is Resolution.note and self.note is None:
            raise ValueError("a `note` resolution needs the note")
        return self


class PairResolutionIn(ResolutionIn):
    """A resolution naming the contradiction by its id, or by its two memories (either order)."""

    contradiction_id: uuid.UUID | None = None
    memory_id: uuid.UUID | None = None
    other_id: uuid.UUID | None = None

    @model_validator(mode="after")
    def _named(self) -> PairResolutionIn:
        pair = (self.memory_id, self.other_id)
        if self.contradiction_id is not None and any(v is not None for v in pair):
            raise ValueError("give contradiction_id, or memory_id and other_id, not both")
        if self.contradiction_id is None and None in pair:
            raise ValueError("give contradiction_id, or both memory_id and other_id")
        return self


class ContradictionOut(BaseModel):
    id: uuid.UUID
    namespace: str
    memory_id: uuid.UUID
    other_id: uuid.UUID
    note: str | None
    state: ContradictionState
    resolution: Resolution | None
    kept_id: uuid.UUID | None = Field(description="With `keep_one`: the memory kept (the other was archived).")
    resolution_note: str | None
    created_by: str
    created_at: datetime
    resolved_by: str | None
    resolved_at: datetime | None


class ContradictionPage(BaseModel):
    data: list[ContradictionOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")
