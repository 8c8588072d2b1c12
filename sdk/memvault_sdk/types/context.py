from __future__ import annotations

from memvault_sdk.types._model import Model, Params
from memvault_sdk.types.memories import MemoryFilters
from memvault_sdk.types.search import EntityHit, Kind, MessageHit, TraceHit


class ContextParams(Params):
    query: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    token_budget: int | None = None
    limit: int | None = None
    filters: MemoryFilters | None = None
    kinds: list[Kind] | None = None


class Context(Model):
    context: str
    tokens: int
    token_budget: int
    memory_ids: list[str]
    truncated: bool
    omitted: int
    # True when the block opens with the session's observation; the lists only when `kinds` asked for them.
    session_observation: bool = False
    messages: list[MessageHit] | None = None
    traces: list[TraceHit] | None = None
    entities: list[EntityHit] | None = None
