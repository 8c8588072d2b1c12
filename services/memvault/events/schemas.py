from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from memvault.fields import Body
from memvault.memories.schemas import Content, Metadata, OwnerId, Timestamp, no_nul

MAX_MESSAGES = 500

SessionId = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(no_nul)]
Speaker = Annotated[str | None, Field(default=None, min_length=1, max_length=200), AfterValidator(no_nul)]


class Role(StrEnum):
    user = "user"
    participant = "participant"
    assistant = "assistant"
    tool = "tool"
    system = "system"


class MessageIn(Body):
    model_config = ConfigDict(extra="forbid")

    role: Role
    content: Content
    speaker: Speaker = Field(default=None, description="Who said it, when the role alone does not tell.")
    timestamp: Timestamp = Field(default=None, description="When it was said; default: when it arrives.")
    session_id: OwnerId = Field(default=None, description="Overrides the request's `session_id`.")
    user_id: OwnerId = Field(default=None, description="Overrides the request's `user_id`.")
    metadata: Metadata = Field(default_factory=dict)


class EventsIn(Body):
    """Messages to append, in conversation order. Every message needs a session: its own
    `session_id` or the request's."""

    model_config = ConfigDict(extra="forbid")

    session_id: OwnerId = Field(default=None, description="Session of every message that names none.")
    user_id: OwnerId = Field(default=None, description="User of every message that names none.")
    messages: list[MessageIn] = Field(min_length=1, max_length=MAX_MESSAGES)


class SessionOut(BaseModel):
    id: str
    user_id: str | None
    started_at: datetime = Field(description="Time of its earliest message.")
    last_event_at: datetime = Field(description="Time of its latest message.")
    message_count: int


class IngestOut(BaseModel):
    job_id: uuid.UUID = Field(description="The extraction job; poll GET /v1/jobs/{job_id}.")
    job_created: bool = Field(
        description="False when an identical earlier request already has an extraction job: these events "
        "were appended and share that job, so the same messages are not extracted twice."
    )
    event_ids: list[uuid.UUID] = Field(description="One per message, in request order.")
    sessions: list[SessionOut] = Field(description="Every session the messages touched, as it now stands.")


class MessageOut(BaseModel):
    id: uuid.UUID
    session_id: str
    user_id: str | None
    role: Role
    speaker: str | None
    content: str
    timestamp: datetime = Field(description="When it was said (the message's own timestamp, else its arrival).")
    recorded_at: datetime
    metadata: dict[str, Any]
    job_id: uuid.UUID | None


class SessionPage(BaseModel):
    data: list[SessionOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class MessagePage(BaseModel):
    data: list[MessageOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")
