"""What a search or a context can find besides memories (``kinds``): conversation messages,
reasoning traces and entities, each returned in a list of its own with a few fields per hit, so
the memory results keep their shape and today's callers (``kinds`` left at its default,
``[memories]``) see no change."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Literal, get_args

from pydantic import BaseModel, Field

# Characters of a message kept in a hit: enough to recognise it; session_messages reads it whole.
MESSAGE_CHARS = 500


class Kind(StrEnum):
    memories = "memories"
    messages = "messages"
    traces = "traces"
    entities = "entities"


DEFAULT_KINDS = [Kind.memories]
# The same names as a Literal, for MCP: an inline enum costs a model fewer tokens than a $ref.
KindName = Literal["memories", "messages", "traces", "entities"]
assert set(get_args(KindName)) == set(Kind), "KindName and Kind must name the same kinds"
KINDS_DESCRIPTION = (
    "What to search: memories (default), messages (conversation events), traces (reasoning traces by task and "
    "outcome), entities (by name, alias, description). Each kind but memories comes back in its own list; "
    "they match the query's words."
)


class MessageHit(BaseModel):
    id: uuid.UUID
    session_id: str
    role: str
    content: str = Field(description=f"The message (its first {MESSAGE_CHARS} characters).")
    timestamp: datetime
    score: float = Field(description="Text rank of the query's words in it (higher is better).")


class TraceHit(BaseModel):
    id: uuid.UUID
    task: str
    # Defaults, so that a copy without its null fields (the MCP door's compact results) still reads.
    outcome: str | None = None
    success: bool | None = None
    score: float


class EntityHit(BaseModel):
    id: uuid.UUID
    name: str
    type: str
    score: float = Field(description="Text rank; 1 more when the query names it outright.")


def not_asked(value: object) -> bool:
    """Left out of a result when not asked for, so a default search or context reads as before."""
    return value is None or value is False


def unique_kinds(v: list[Kind]) -> list[Kind]:
    if not v:
        raise ValueError("give at least one kind")
    return list(dict.fromkeys(v))
