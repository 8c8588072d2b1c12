from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, Field


class ObservationOut(BaseModel):
    """What one conversation was about, as the last extraction of it saw it."""

    session_id: str
    user_id: str | None
    summary: str = Field(description="What the session was about, in a few sentences.")
    topics: list[str] = Field(description="Names and subjects it kept coming back to.")
    decisions: list[str] = Field(description="What was decided in it.")
    open_questions: list[str] = Field(description="What was left open: unanswered questions, undecided matters.")
    observed_by: str = Field(description="`rules` (the built-in extractor) or `llm` (the configured model).")
    message_count: int = Field(description="Messages of the session this observation read.")
    last_event_at: datetime = Field(description="Time of the latest message it read.")
    job_id: uuid.UUID | None = Field(description="The extraction job that wrote it.")
    updated_at: datetime
