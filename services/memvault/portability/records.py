"""What one record of an import file may hold: the write API's own request models, extended with
what a restore keeps (ids to remap, record time, history, vectors).

Each record model derives from the model its kind is written with (`MemoryIn`, `MessageIn`,
`EntityIn`, `RelationIn`, `TraceIn`, `TraceStepIn`, `ContradictionIn`), so the rules for content,
keys, owners, metadata, importance, and the text rule and secrets guard of fields.Body, are the
write API's, defined once. What a file says about who wrote a row (`created_by`) is not kept: the rows are the
importer's (docs/memory-model.md, "Export and import").
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, JsonValue, field_validator, model_validator

from memvault.contradictions.schemas import ContradictionIn, ContradictionState, Note, Resolution
from memvault.entities.schemas import EntityIn, RelationIn
from memvault.events.schemas import MessageIn, SessionId
from memvault.fields import Body
from memvault.memories.schemas import Content, MemoryIn, OwnerId, ScopeLevel, Timestamp, _utc, no_nul
from memvault.observations.base import MAX_ITEM_CHARS, MAX_ITEMS, MAX_SUMMARY_CHARS
from memvault.traces.schemas import MAX_STEPS, TraceIn, TraceStatus, TraceStepIn

# Clocks of the exporting and importing servers may disagree a little; beyond that a record time
# in the future is not a record of anything.
CLOCK_SKEW = timedelta(minutes=5)
MAX_HISTORY = 1000
MAX_SNAPSHOT_CHARS = 131_072  # a version's fields: content (32,000) plus metadata (16 KB) and the rest
MAX_DIM = 4096


def _not_future(v: datetime | None) -> datetime | None:
    if v is not None and v > datetime.now(UTC) + CLOCK_SKEW:
        raise ValueError("is in the future: a record time says when it was stored")
    return v


def _snapshot_size(v: dict[str, Any]) -> dict[str, Any]:
    if len(str(v)) > MAX_SNAPSHOT_CHARS:
        raise ValueError(f"is larger than {MAX_SNAPSHOT_CHARS} characters")
    return v


RecordTime = Annotated[Timestamp, AfterValidator(_not_future)]
Stamp = Annotated[datetime, AfterValidator(_utc), AfterValidator(_not_future)]  # a record time that must be given
Creator = Annotated[str | None, Field(default=None, max_length=200, description="Read, not kept.")]
Vector = Annotated[list[float] | None, Field(default=None, max_length=MAX_DIM)]
ModelId = Annotated[str | None, Field(default=None, max_length=200)]


def _ordered(record: Body, *pairs: tuple[str, str]) -> None:
    for first, then in pairs:
        a, b = getattr(record, first), getattr(record, then)
        if a is not None and b is not None and b < a:
            raise ValueError(f"{then} is before {first}")


class EntityRecord(EntityIn):
    id: uuid.UUID
    created_by: Creator = None
    created_at: RecordTime = None
    updated_at: RecordTime = None

    @model_validator(mode="after")
    def _times(self) -> EntityRecord:
        _ordered(self, ("created_at", "updated_at"))
        return self


class RelationRecord(RelationIn):
    id: uuid.UUID
    created_by: Creator = None
    created_at: RecordTime = None


class SessionRecord(Body):
    model_config = ConfigDict(extra="forbid")

    id: SessionId
    user_id: OwnerId = None
    started_at: Stamp
    last_event_at: Stamp
    message_count: int = Field(default=0, ge=0, le=2**31 - 1)
    created_at: RecordTime = None
    updated_at: RecordTime = None

    @model_validator(mode="after")
    def _times(self) -> SessionRecord:
        _ordered(self, ("started_at", "last_event_at"), ("created_at", "updated_at"))
        return self


class EventRecord(MessageIn):
    id: uuid.UUID
    session_id: SessionId  # type: ignore[assignment]  # required in a file: the request's default is gone
    recorded_at: RecordTime = None
    created_by: Creator = None

    @model_validator(mode="before")
    @classmethod
    def _occurred_at(cls, data: Any) -> Any:
        # The export names the message's `timestamp` by its column, `occurred_at`.
        if isinstance(data, dict) and "occurred_at" in data:
            data = {**data, "timestamp": data["occurred_at"]}
            del data["occurred_at"]
        return data


class HistoryRecord(Body):
    model_config = ConfigDict(extra="forbid")

    action: Literal["created", "superseded", "updated", "promoted", "archived", "merged"]
    actor: str = Field(min_length=1, max_length=200)
    at: Stamp
    changed_fields: list[Annotated[str, Field(max_length=64)]] = Field(default_factory=list, max_length=64)
    snapshot: Annotated[dict[str, JsonValue], AfterValidator(_snapshot_size)] = Field(default_factory=dict)


class MemoryRecord(MemoryIn):
    owner_from_caller = False  # a file names every owner itself

    id: uuid.UUID
    scope: ScopeLevel  # type: ignore[assignment]  # required in a file: it was resolved when first written
    recorded_at: RecordTime = None
    superseded_at: RecordTime = None
    superseded_by: uuid.UUID | None = None
    supersedes: uuid.UUID | None = None
    content_hash: str | None = Field(default=None, max_length=128, description="Read, not kept: recomputed.")
    access_count: int = Field(default=0, ge=0, le=2**31 - 1)
    last_accessed_at: RecordTime = None
    created_by: Creator = None
    created_at: RecordTime = None
    updated_at: RecordTime = None
    embedding_model: ModelId = None
    embedding: Vector = None
    history: list[HistoryRecord] = Field(default_factory=list, max_length=MAX_HISTORY)

    @field_validator("scope")
    @classmethod
    def _in_a_namespace(cls, v: ScopeLevel) -> ScopeLevel:
        if v in (ScopeLevel.tenant, ScopeLevel.system):
            raise ValueError(f"{v.value}-scope memories are not part of a namespace")
        return v

    @model_validator(mode="after")
    def _times(self) -> MemoryRecord:
        _ordered(self, ("recorded_at", "superseded_at"), ("created_at", "updated_at"))
        return self


class StepRecord(TraceStepIn):
    seq: int = Field(ge=1, le=MAX_STEPS)
    at: RecordTime = None


class TraceRecord(TraceIn):
    id: uuid.UUID
    status: TraceStatus = TraceStatus.open
    outcome: Content | None = None
    success: bool | None = None
    step_count: int = Field(default=0, ge=0, le=MAX_STEPS)
    created_by: Creator = None
    started_at: RecordTime = None
    completed_at: RecordTime = None
    embedding_model: ModelId = None
    embedding: Vector = None
    steps: list[StepRecord] = Field(default_factory=list, max_length=MAX_STEPS)

    @model_validator(mode="after")
    def _times(self) -> TraceRecord:
        _ordered(self, ("started_at", "completed_at"))
        if len({s.seq for s in self.steps}) != len(self.steps):
            raise ValueError("two steps share a seq")
        return self


class ContradictionRecord(ContradictionIn):
    """A mark that two memories of the file disagree, open or as it was resolved. Who resolved it
    is kept as the account of what happened in the original namespace, as a history entry's actor."""

    id: uuid.UUID
    state: ContradictionState = ContradictionState.open
    resolution: Resolution | None = None
    kept_id: uuid.UUID | None = None
    resolution_note: Note = None
    created_by: Creator = None
    created_at: RecordTime = None
    resolved_by: Annotated[str | None, Field(default=None, max_length=200), AfterValidator(no_nul)] = None
    resolved_at: RecordTime = None

    @model_validator(mode="after")
    def _resolved(self) -> ContradictionRecord:
        if self.state is ContradictionState.open:
            if any(v is not None for v in (self.resolution, self.kept_id, self.resolved_at)):
                raise ValueError("an open contradiction has no resolution, kept_id or resolved_at")
            return self
        if self.resolution is None or self.resolved_at is None:
            raise ValueError("a resolved contradiction needs its resolution and resolved_at")
        if (self.resolution is Resolution.keep_one) != (self.kept_id is not None):
            raise ValueError("kept_id goes with keep_one, and keep_one needs it")
        if self.kept_id is not None and self.kept_id not in (self.memory_id, self.other_id):
            raise ValueError("kept_id is one of the two memories")
        _ordered(self, ("created_at", "resolved_at"))
        return self


Item = Annotated[str, Field(min_length=1, max_length=MAX_ITEM_CHARS), AfterValidator(no_nul)]
Items = Annotated[list[Item], Field(default_factory=list, max_length=MAX_ITEMS)]


class ObservationRecord(Body):
    """A session's observation (what extraction made of the conversation), named by its session."""

    model_config = ConfigDict(extra="forbid")

    session_id: SessionId
    user_id: OwnerId = None
    summary: Annotated[str, Field(min_length=1, max_length=MAX_SUMMARY_CHARS), AfterValidator(no_nul)]
    topics: Items
    decisions: Items
    open_questions: Items
    observed_by: str = Field(min_length=1, max_length=64)
    message_count: int = Field(default=0, ge=0, le=2**31 - 1)
    last_event_at: Stamp
    created_at: RecordTime = None
    updated_at: RecordTime = None

    @model_validator(mode="after")
    def _times(self) -> ObservationRecord:
        _ordered(self, ("created_at", "updated_at"))
        return self


RECORDS: dict[str, type[Body]] = {
    "entity": EntityRecord,
    "relation": RelationRecord,
    "session": SessionRecord,
    "event": EventRecord,
    "observation": ObservationRecord,
    "memory": MemoryRecord,
    "contradiction": ContradictionRecord,
    "trace": TraceRecord,
}
