from __future__ import annotations

from datetime import datetime
from typing import Any

from memvault_sdk.types._model import Model

FINISHED = frozenset({"succeeded", "failed", "cancelled"})


class Job(Model):
    id: str
    kind: str
    namespace: str | None = None
    status: str
    progress: float | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    attempts: int = 0
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    # Set once cancelling was asked; a running job stops at its next batch.
    cancel_requested_at: datetime | None = None
    updated_at: datetime

    @property
    def finished(self) -> bool:
        return self.status in FINISHED
