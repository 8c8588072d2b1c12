from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field


class JobStatus(StrEnum):
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"


class JobOut(BaseModel):
    id: uuid.UUID
    kind: str = Field(
        description="`extraction`, `organize`, or one of organize's steps run alone: "
        "`dedup`, `decay`, `promote`, `reembed`."
    )
    namespace: str | None
    status: JobStatus = Field(
        description="queued → running → succeeded | failed | cancelled. A job that failed and will be retried is "
        "`queued` again with the last `error` kept."
    )
    progress: float | None = Field(description="0..1 while running; 1 when succeeded.")
    result: dict[str, Any] | None = Field(
        description="What the job did (counts per step), once it has finished; a cancelled job's says what it did "
        "before it stopped."
    )
    error: str | None = Field(description="Why the last attempt failed.")
    attempts: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    cancel_requested_at: datetime | None = Field(
        default=None, description="When cancelling was asked; a running job stops at its next batch."
    )
    updated_at: datetime


class JobPage(BaseModel):
    data: list[JobOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next (older) page; null on the last.")
