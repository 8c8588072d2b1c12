from __future__ import annotations

from datetime import datetime
from typing import Literal

from memvault_sdk.types._model import Model, Params
from memvault_sdk.types.memories import Memory, MemoryFilters

Fusion = Literal["weighted", "rrf"]


class SearchParams(Params):
    query: str
    limit: int | None = None
    filters: MemoryFilters | None = None
    min_score: float | None = None
    knowledge_at: datetime | None = None
    valid_at: datetime | None = None
    weights: dict[str, float] | None = None
    fusion: Fusion | None = None
    reference_time: datetime | None = None
    neighbours: int | None = None
    rerank: bool | None = None
    rewrite: bool | None = None


class ChannelSignal(Model):
    rank: int | None = None
    value: float | None = None


class Signals(Model):
    dense_rank: int | None = None
    lexical_rank: int | None = None
    lexical_score: float | None = None
    channels: dict[str, ChannelSignal] = {}


class SearchResult(Model):
    score: float
    semantic_relevance: float | None = None
    signals: Signals
    memory: Memory
    neighbours: list[Memory] | None = None
    contradicted_by: list[str] = []


class SearchMetrics(Model):
    timings_ms: dict[str, float]
    matched_by: dict[str, int]
    backend_failures: list[str]
    min_score_applied: bool
    candidates: dict[str, int] = {}
    weights: dict[str, float] = {}
    fusion: str | None = None
    cues: dict[str, str] = {}
    stages: dict[str, str] = {}


class SearchResponse(Model):
    results: list[SearchResult]
    metrics: SearchMetrics
