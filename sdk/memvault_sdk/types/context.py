from __future__ import annotations

from memvault_sdk.types._model import Model, Params
from memvault_sdk.types.memories import MemoryFilters


class ContextParams(Params):
    query: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    token_budget: int | None = None
    limit: int | None = None
    filters: MemoryFilters | None = None


class Context(Model):
    context: str
    tokens: int
    token_budget: int
    memory_ids: list[str]
    truncated: bool
    omitted: int
