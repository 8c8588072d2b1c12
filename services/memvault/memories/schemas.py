from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Protocol

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from memvault.fields import MAX_DEPTH, Body, UnitFloat, check_text, check_value, iso_instant

MAX_METADATA_BYTES = 16_384
MAX_METADATA_DEPTH = MAX_DEPTH
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


class ScopeLevel(StrEnum):
    """Narrowest first: when two visible memories share type and key, the narrower one wins."""

    session = "session"
    user = "user"
    namespace = "namespace"
    tenant = "tenant"
    system = "system"


SCOPE_RANK = {level.value: rank for rank, level in enumerate(ScopeLevel)}


def _metadata_size(v: dict[str, Any]) -> dict[str, Any]:
    # JSONB refuses NaN, Infinity, NUL and unpaired surrogates, and very deep nesting cannot be
    # serialised back out: fields.Body refuses those in every field; the size bound is metadata's own.
    check_value(v)
    if len(json.dumps(v, default=str)) > MAX_METADATA_BYTES:
        raise ValueError(f"metadata is larger than {MAX_METADATA_BYTES} bytes of JSON")
    return v


def _utc(v: datetime | None) -> datetime | None:
    # A timestamp without an offset is read as UTC: otherwise comparing it with a stored (zoned)
    # one raises, and PostgreSQL would read it in its own time zone. Times that fall outside
    # years 1-9999 in UTC could be stored but never read back, so they are refused.
    if v is None:
        return None
    if v.tzinfo is None:
        return v.replace(tzinfo=UTC)
    try:
        return v.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("timestamp is out of range in UTC") from exc


def no_nul(v: str | None) -> str | None:
    # The text rule of fields.Body, for query parameters (which are not a Body).
    if v is not None:
        check_text(v)
    return v


Metadata = Annotated[dict[str, Any], AfterValidator(_metadata_size)]
OwnerId = Annotated[str | None, Field(default=None, min_length=1, max_length=200), AfterValidator(no_nul)]
Key = Annotated[str | None, Field(default=None, min_length=1, max_length=200), AfterValidator(no_nul)]


def _not_blank(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be blank")
    return v


Content = Annotated[str, Field(min_length=1, max_length=32_000), AfterValidator(no_nul), AfterValidator(_not_blank)]
Timestamp = Annotated[datetime | None, BeforeValidator(iso_instant), AfterValidator(_utc)]
FilterId = Annotated[str | None, Field(default=None, max_length=200), AfterValidator(no_nul)]


class _ValidRange(Body):
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
    key: Key = Field(
        default=None,
        description="Stable name of what this memory is about (e.g. `seat_preference`). Writing the same "
        "(scope, owner, type, key) again supersedes the current memory instead of adding a second one.",
    )
    scope: ScopeLevel | None = Field(
        default=None,
        description="Who sees it: `session`, `user`, `namespace`, `tenant` (every namespace; admin keys) or "
        "`system` (every tenant; operator keys). Default: `user` when user_id is set, else `session` when "
        "session_id is set, else `namespace`.",
    )
    user_id: OwnerId = None
    agent_id: OwnerId = None
    session_id: OwnerId = None
    entity_ids: list[uuid.UUID] = Field(default_factory=list, max_length=50, description="Entities it concerns.")
    entity_names: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list,
        max_length=50,
        description="Entities it concerns, by name or alias (any case); each must name one entity of the namespace.",
    )
    source_event_ids: list[uuid.UUID] = Field(
        default_factory=list, max_length=500, description="Events it was extracted from (provenance)."
    )
    metadata: Metadata = Field(default_factory=dict)
    importance: UnitFloat = 0.5
    confidence: UnitFloat = 1.0
    state: MemoryState = MemoryState.stable
    valid_from: Timestamp = None
    valid_to: Timestamp = None
    # Whether the caller chose the scope (bind_owner leaves a chosen shared scope shared).
    _scope_given: bool = PrivateAttr(default=False)
    # `scope: user` may come without a user_id when the caller is signed in: the facade binds it
    # (acting.py) and refuses it for a caller who is not (MemoryOps.store_many).
    owner_from_caller: ClassVar[bool] = True

    @model_validator(mode="after")
    def _scope_owner(self) -> MemoryIn:
        self._scope_given = self.scope is not None
        if self.scope is None:
            self.scope = (
                ScopeLevel.user if self.user_id else ScopeLevel.session if self.session_id else ScopeLevel.namespace
            )
        if self.scope is ScopeLevel.user and not self.user_id and not self.owner_from_caller:
            raise ValueError("scope 'user' needs a user_id")
        if self.scope is ScopeLevel.session and not self.session_id:
            raise ValueError("scope 'session' needs a session_id")
        return self

    @property
    def level(self) -> ScopeLevel:
        assert self.scope is not None  # set by the validator
        return self.scope

    def bind_owner(self, user_id: str | None) -> None:
        """The facade's binding (acting.py) for a caller signed in as ``user_id``: a memory stored
        without a user_id is theirs, at user scope unless the caller chose a scope. A chosen
        namespace, tenant or system scope stays shared (its own role rule applies); a chosen
        session scope keeps the owner, so another user's reads of that session skip it."""
        if user_id is None or self.user_id is not None:
            return
        if self._scope_given and self.scope not in (ScopeLevel.session, ScopeLevel.user):
            return
        self.user_id = user_id
        if not self._scope_given:
            self.scope = ScopeLevel.user


class MemoryPatch(_ValidRange):
    """Fields to change; omitted fields stay as they are, and null clears an optional field."""

    model_config = ConfigDict(extra="forbid")
    # A user_id here moves the memory to that user: checked against the caller, never filled in.
    binds_user: ClassVar[bool] = False

    content: Content | None = None
    type: MemoryType | None = None
    key: Key = None
    user_id: OwnerId = None
    agent_id: OwnerId = None
    session_id: OwnerId = None
    metadata: Metadata | None = None
    importance: UnitFloat | None = None
    confidence: UnitFloat | None = None
    state: MemoryState | None = None
    valid_from: Timestamp = None
    valid_to: Timestamp = None

    @field_validator("content", "type", "metadata", "importance", "confidence", "state", mode="before")
    @classmethod
    def _required_not_null(cls, v: Any) -> Any:
        # A validator per field, so the error names the field (`content`), not the whole body.
        if v is None:
            raise ValueError("cannot be null")
        return v

    @model_validator(mode="after")
    def _not_empty(self) -> MemoryPatch:
        if not self.model_fields_set:
            raise ValueError("nothing to update")
        return self


class MemoryBatchIn(Body):
    model_config = ConfigDict(extra="forbid")

    memories: list[MemoryIn] = Field(min_length=1, max_length=MAX_BATCH)


class Dated(Protocol):
    @property
    def valid_from(self) -> datetime | None: ...

    @property
    def created_at(self) -> datetime: ...


def occurred(m: Dated) -> datetime:
    """A memory already read (a row, or what a client is shown of it): its ``valid_from``, else
    when it was stored, as every read places it in time (in SQL: reads_repository.date_of)."""
    return m.valid_from or m.created_at


class MemoryOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    namespace: str | None = Field(description="Null for tenant- and system-scope memories, shared by all namespaces.")
    type: MemoryType
    key: str | None
    content: str
    user_id: str | None
    agent_id: str | None
    session_id: str | None
    scope: ScopeLevel
    metadata: dict[str, Any]
    importance: float
    confidence: float
    state: MemoryState
    valid_from: datetime | None
    valid_to: datetime | None
    recorded_at: datetime
    superseded_at: datetime | None
    superseded_by: uuid.UUID | None
    supersedes: uuid.UUID | None
    source_event_ids: list[uuid.UUID]
    embedding_model: str | None
    content_hash: str
    access_count: int
    last_accessed_at: datetime | None
    created_by: str
    created_at: datetime
    updated_at: datetime


class MemoryBatchOut(BaseModel):
    memories: list[MemoryOut]


class MemoryFilters(Body):
    guard_secrets = False  # never stored: it only selects what to read or forget

    model_config = ConfigDict(extra="forbid")

    type: list[MemoryType] | None = None
    user_id: FilterId = None
    agent_id: FilterId = None
    session_id: FilterId = None
    state: list[MemoryState] | None = Field(
        default=None, description="Lifecycle states to include; default excludes archived."
    )
    metadata: Metadata | None = Field(default=None, description="Exact match on these metadata keys.")
    scopes: list[ScopeLevel] | None = Field(default=None, description="Scope levels to include; default all.")
    knowledge_at: Timestamp = Field(
        default=None, description="What we knew at this time: memories recorded by then and not yet superseded."
    )
    valid_at: Timestamp = Field(default=None, description="What was true in the world at this time (valid time).")
    since: Timestamp = Field(
        default=None,
        description="Memories dated at or after this time. A memory's date is its `valid_from`, else when it "
        "was stored: the date its recency and the context block go by.",
    )
    until: Timestamp = Field(default=None, description="Memories dated before this time (see `since`).")
    include_archived: bool = Field(default=False, description="Also return archived memories.")
    entity_id: uuid.UUID | None = Field(default=None, description="Only memories linked to this entity.")

    @field_validator("until")
    @classmethod
    def _after_since(cls, v: datetime | None, info: ValidationInfo) -> datetime | None:
        since = info.data.get("since")
        if v is not None and since is not None and v <= since:
            raise ValueError("must be after since")
        return v


class MemoryPage(BaseModel):
    data: list[MemoryOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class MemoryChange(BaseModel):
    """One entry of a memory's history: what happened to which version, by whom and when."""

    memory_id: uuid.UUID
    action: str = Field(description="created, superseded, updated, promoted, archived or merged.")
    actor: str
    at: datetime
    changed_fields: list[str]
    snapshot: dict[str, Any] = Field(description="The version's fields after the change.")


class MemoryHistory(BaseModel):
    memory_id: uuid.UUID
    current_id: uuid.UUID | None = Field(description="The version that is current now; null if none is.")
    versions: list[MemoryOut] = Field(description="Every version of this memory, oldest first.")
    changes: list[MemoryChange] = Field(description="Every change to any version, oldest first.")
