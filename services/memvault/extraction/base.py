"""The one interface every extractor implements, and what flows through it."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

# Memory types an extractor may produce (a subset of memories.schemas.MemoryType).
EXTRACTED_TYPES = ("preference", "decision", "instruction", "task", "fact", "event")


@dataclass(frozen=True)
class EventText:
    """One event as an extractor sees it."""

    id: uuid.UUID
    role: str
    content: str
    occurred_at: datetime
    speaker: str | None = None
    user_id: str | None = None
    session_id: str | None = None


@dataclass
class Candidate:
    """A memory an extractor proposes. The facade decides what becomes of it (secrets guard,
    exact-duplicate check, supersession by key)."""

    content: str
    type: str
    event_ids: list[uuid.UUID]
    user_id: str | None = None
    session_id: str | None = None
    speaker: str | None = None
    valid_from: datetime | None = None
    # Relative dates resolved against the event time: [{"text", "date", "granularity"}].
    dates: list[dict[str, Any]] = field(default_factory=list)
    # (name, entity type) pairs the statement mentions.
    entities: list[tuple[str, str]] = field(default_factory=list)
    importance: float = 0.5
    confidence: float = 0.6
    key: str | None = None


class Extractor(Protocol):
    name: str

    async def extract(self, events: Sequence[EventText]) -> list[Candidate]:
        """Candidates for memories from a run of events of one conversation, in order."""
        ...
