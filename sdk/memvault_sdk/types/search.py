from __future__ import annotations

from datetime import datetime

from memvault_sdk.types._model import Model, Params
from memvault_sdk.types.memories import Memory, MemoryFilters


class SearchParams(Params):
    query: str
    limit: int | None = None
    filters: MemoryFilters | None = None
    min_score: float | None = None
    knowledge_at: datetime | None = None
    valid_at: datetime | None = None


class Signals(Model):
    dense_rank: int | None = None
    lexical_rank: int | None = None
    lexical_score: float | None = None


class SearchResult(Model):
    score: float
    semantic_relevance: float | None = None
    signals: Signals
    memory: Memory


class SearchMetrics(Model):
    timings_ms: dict[str, float]
    matched_by: dict[str, int]
    backend_failures: list[str]
    min_score_applied: bool


class SearchResponse(Model):
    results: list[SearchResult]
    metrics: SearchMetrics
