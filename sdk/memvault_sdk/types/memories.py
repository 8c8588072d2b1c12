from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from memvault_sdk.types._model import Model, Params

MemoryType = Literal[
    "fact", "preference", "decision", "instruction", "task", "event", "procedure", "entity", "summary", "note"
]
MemoryState = Literal["tentative", "stable", "archived"]
ScopeLevel = Literal["session", "user", "namespace", "tenant", "system"]


class MemoryCreate(Params):
    """One memory to store (``memories.create`` takes these fields as arguments; ``create_many`` a list)."""

    content: str
    type: MemoryType | None = None
    key: str | None = None
    scope: ScopeLevel | None = None
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    entity_ids: list[str] | None = None
    source_event_ids: list[str] | None = None
    metadata: dict[str, Any] | None = None
    importance: float | None = None
    confidence: float | None = None
    state: MemoryState | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None


class MemoryBatchCreate(Params):
    memories: list[MemoryCreate]


class MemoryUpdate(Params):
    content: str | None = None
    type: MemoryType | None = None
    key: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    metadata: dict[str, Any] | None = None
    importance: float | None = None
    confidence: float | None = None
    state: MemoryState | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None


class MemoryFilters(Params):
    """Filters shared by search and context: what a list of memories would apply."""

    type: list[MemoryType] | None = None
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    state: list[MemoryState] | None = None
    metadata: dict[str, Any] | None = None
    scopes: list[ScopeLevel] | None = None
    knowledge_at: datetime | None = None
    valid_at: datetime | None = None
    since: datetime | None = None
    until: datetime | None = None
    include_archived: bool | None = None


class Memory(Model):
    id: str
    namespace: str | None = None
    type: str
    key: str | None = None
    content: str
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    scope: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    importance: float
    confidence: float
    state: str
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    recorded_at: datetime
    superseded_at: datetime | None = None
    superseded_by: str | None = None
    supersedes: str | None = None
    source_event_ids: list[str] = Field(default_factory=list)
    embedding_model: str | None = None
    content_hash: str
    access_count: int = 0
    last_accessed_at: datetime | None = None
    created_by: str
    created_at: datetime
    updated_at: datetime


class MemoryChange(Model):
    memory_id: str
    action: str
    actor: str
    at: datetime
    changed_fields: list[str]
    snapshot: dict[str, Any]


class MemoryHistory(Model):
    memory_id: str
    current_id: str | None = None
    versions: list[Memory]
    changes: list[MemoryChange]


class MemoryBatch(Model):
    memories: list[Memory]
