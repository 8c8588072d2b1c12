from __future__ import annotations

from datetime import datetime
from typing import Literal

from memvault_sdk.types._model import Model, Params
from memvault_sdk.types.memories import Memory, MemoryFilters

Fusion = Literal["weighted", "rrf"]
# What a search or context looks through; each kind but memories comes back in a list of its own.
Kind = Literal["memories", "messages", "traces", "entities"]


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
    kinds: list[Kind] | None = None
    hops: bool | None = None


class ChannelSignal(Model):
    rank: int | None = None
    value: float | None = None


class HopSignal(Model):
    from_memory: str
    entity_id: str
    entity: str


class Signals(Model):
    dense_rank: int | None = None
    lexical_rank: int | None = None
    lexical_score: float | None = None
    channels: dict[str, ChannelSignal] = {}
    # "session" or "inferred": how the context channel found this memory's conversation.
    neighbourhood: str | None = None
    # With ``hops``: the hit and entity through which a memory the first stage missed was reached.
    hop: HopSignal | None = None


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


class MessageHit(Model):
    id: str
    session_id: str
    role: str
    content: str
    timestamp: datetime
    score: float


class TraceHit(Model):
    id: str
    task: str
    outcome: str | None = None
    success: bool | None = None
    score: float


class EntityHit(Model):
    id: str
    name: str
    type: str
    score: float


class SearchResponse(Model):
    results: list[SearchResult]
    metrics: SearchMetrics
    # Present only when `kinds` asked for them.
    messages: list[MessageHit] | None = None
    traces: list[TraceHit] | None = None
    entities: list[EntityHit] | None = None
