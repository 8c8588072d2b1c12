from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from memvault_sdk.types._model import Model, Params

Role = Literal["user", "participant", "assistant", "tool", "system"]


class MessageParam(Params):
    """One conversation message to ingest."""

    role: Role
    content: str
    speaker: str | None = None
    timestamp: datetime | None = None
    session_id: str | None = None
    user_id: str | None = None
    metadata: dict[str, Any] | None = None


class IngestParams(Params):
    session_id: str | None = None
    user_id: str | None = None
    messages: list[MessageParam]


class Session(Model):
    id: str
    user_id: str | None = None
    started_at: datetime
    last_event_at: datetime
    message_count: int


class Observation(Model):
    """What a session was about, as its last extraction wrote it."""

    session_id: str
    user_id: str | None = None
    summary: str
    topics: list[str]
    decisions: list[str]
    open_questions: list[str]
    observed_by: str
    message_count: int
    last_event_at: datetime
    job_id: str | None = None
    updated_at: datetime


class IngestResult(Model):
    job_id: str
    job_created: bool
    event_ids: list[str]
    sessions: list[Session]


class Message(Model):
    id: str
    session_id: str
    user_id: str | None = None
    role: str
    speaker: str | None = None
    content: str
    timestamp: datetime
    recorded_at: datetime
    metadata: dict[str, Any] = Field(default_factory=dict)
    job_id: str | None = None
