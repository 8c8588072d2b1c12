from __future__ import annotations

import uuid
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from memvault.fields import Body
from memvault.memories.schemas import MemoryFilters, MemoryOut, Timestamp, _not_blank, no_nul
from memvault.retrieval.kinds import (
    DEFAULT_KINDS,
    KINDS_DESCRIPTION,
    EntityHit,
    Kind,
    MessageHit,
    TraceHit,
    not_asked,
    unique_kinds,
)

# Fusion channels: two retrieve candidates (dense, lexical); the rest rank those candidates.
CHANNELS = ("dense", "lexical", "recency", "importance", "access", "strength", "intent", "graph", "time", "context")
# Steps after the fusion, weighted like the channels (0 turns one off): the best hit's conversation
# neighbours lifted (retrieval/window.py).
AFTER_FUSION = ("window",)
# Checked on the LoCoMo benchmark (docs/benchmarks.md): retrieval stays dominant; the priors only
# reorder the retrieval head; cues count only when the query has one.
# Recency, importance and access are off by default: on LoCoMo (no dates, default importance)
# they cost MRR@10 0.405 -> 0.390 (docs/benchmarks.md). Intent and time act only when the query
# carries such a cue. Callers turn the others on per request until a dated benchmark sets them.
DEFAULT_WEIGHTS: dict[str, float] = {
    "dense": 1.0,
    "lexical": 1.0,
    "recency": 0.0,
    "importance": 0.0,
    "access": 0.0,
    "strength": 0.0,
    "intent": 0.5,
    "graph": 0.5,
    "time": 2.0,
    # A memory's session neighbours matching the query: recall@10 0.681 -> 0.75x on LoCoMo
    # (docs/benchmarks.md), where the evidence of an answer is often the turn after the question.
    "context": 1.0,
    # The best hit's conversation neighbours among the hits lifted (retrieval/window.py).
    "window": 0.1,
}


Fusion = Literal["rrf", "weighted"]
# Weighted relative scores beat rank fusion on LoCoMo (recall@10 0.684 against 0.608 with BM25,
# docs/benchmarks.md): a rank throws away how far ahead the best match is.
DEFAULT_FUSION: Fusion = "weighted"


def check_weights(v: dict[str, float] | None) -> dict[str, float] | None:
    if v is None:
        return v
    unknown = sorted(set(v) - set(CHANNELS) - set(AFTER_FUSION))
    if unknown:
        raise ValueError(f"unknown channels {unknown}; known: {list(CHANNELS + AFTER_FUSION)}")
    for name, w in v.items():
        if not (0 <= w <= 10):  # also refuses NaN
            raise ValueError(f"weight of {name!r} must be between 0 and 10")
    return v


class SearchIn(Body):
    guard_secrets = False  # never stored: it only selects what to read or forget

    model_config = ConfigDict(extra="forbid")

    query: Annotated[str, Field(min_length=1, max_length=4000), AfterValidator(no_nul), AfterValidator(_not_blank)]
    limit: int = Field(default=10, ge=1, le=100)
    filters: MemoryFilters | None = None
    min_score: float | None = Field(
        default=None, ge=-1, le=1, description="Drop results whose semantic_relevance (cosine) is below this."
    )
    knowledge_at: Timestamp = Field(default=None, description="Search what we knew at this time.")
    valid_at: Timestamp = Field(default=None, description="Search what was true in the world at this time.")
    weights: dict[str, float] | None = Field(
        default=None,
        description=f"Per-channel fusion weights (0..10) over the defaults {DEFAULT_WEIGHTS}; 0 turns one off.",
    )
    fusion: Fusion | None = Field(
        default=None,
        description="`weighted` (weighted mean of each channel's value scaled to 0..1 over the candidates) or "
        "`rrf` (weighted reciprocal rank). Default: the namespace's setting, else `weighted`.",
    )
    reference_time: Timestamp = Field(
        default=None, description='What "now" is for time cues such as "yesterday" or "last week"; default: now.'
    )
    neighbours: int = Field(
        default=0,
        ge=0,
        le=5,
        description="Also return up to this many memories before and after each hit, in its session.",
    )
    rerank: bool | None = Field(
        default=None,
        description="Rerank the top fused hits with the configured reranker. Default: when one is configured; "
        "false skips it. `metrics.stages` says what ran.",
    )
    rewrite: bool | None = Field(
        default=None,
        description="Also search by meaning with a hypothetical answer written by the configured query rewriter "
        "(HyDE). Default: when one is configured; false skips it. `metrics.stages` says what ran.",
    )
    hops: bool = Field(
        default=False,
        description="Entity hop (multi-hop questions): memories linked to a specific entity of the best three hits "
        "(not one the query names, not one linked to more than 50 memories) join the results, each below the hit "
        "that led to it; `signals.hop` says how it was reached, `metrics.stages.hops` whether any joined.",
    )
    entity_id: uuid.UUID | None = Field(default=None, description="Only memories linked to this entity.")
    entity: Annotated[str | None, Field(min_length=1, max_length=200), AfterValidator(no_nul)] = Field(
        default=None,
        description="Only memories linked to the entity of this name or alias (any case); an unknown or "
        "ambiguous name is refused.",
    )

    kinds: Annotated[list[Kind], AfterValidator(unique_kinds)] = Field(
        default_factory=lambda: list(DEFAULT_KINDS), max_length=len(Kind), description=KINDS_DESCRIPTION
    )

    @field_validator("weights")
    @classmethod
    def _known_weights(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        return check_weights(v)

    def effective_weights(self, namespace_weights: dict[str, float] | None = None) -> dict[str, float]:
        """Service defaults, then the namespace's, then the request's."""
        return {**DEFAULT_WEIGHTS, **(namespace_weights or {}), **(self.weights or {})}

    @model_validator(mode="after")
    def _time_into_filters(self) -> SearchIn:
        # Top-level for convenience; the filters are what every read path applies.
        if self.knowledge_at is not None or self.valid_at is not None or self.entity_id is not None:
            f = self.filters or MemoryFilters()
            self.filters = f.model_copy(
                update={
                    "knowledge_at": self.knowledge_at or f.knowledge_at,
                    "valid_at": self.valid_at or f.valid_at,
                    "entity_id": self.entity_id or f.entity_id,
                }
            )
        return self


class ChannelSignal(BaseModel):
    rank: int | None = Field(
        description="Rank among the candidates in this channel; null if it does not rank this one."
    )
    value: float | None = Field(description="What the channel ranks by (cosine, text rank, decayed recency, ...).")


class HopSignal(BaseModel):
    from_memory: uuid.UUID = Field(description="The hit this memory was reached from.")
    entity_id: uuid.UUID = Field(description="The entity both are linked to.")
    entity: str = Field(description="That entity's name.")


class Signals(BaseModel):
    dense_rank: int | None = Field(description="Rank among vector candidates; null if not a vector candidate.")
    lexical_rank: int | None = Field(description="Rank among full-text candidates; null if no word matched.")
    lexical_score: float | None
    channels: dict[str, ChannelSignal] = Field(
        default_factory=dict, description="Every channel that took part in the fusion, with its rank and value."
    )
    hop: HopSignal | None = Field(
        default=None,
        exclude_if=not_asked,
        description="With `hops`: how a memory the first stage did not find was reached.",
    )
    neighbourhood: Literal["session", "inferred"] | None = Field(
        default=None,
        description="With the `context` channel: how this memory's conversation was found. `session`: by its "
        "`session_id`; `inferred`: an event without one, whose neighbours are the events of the same owner (scope, "
        "user, agent) also without one, just before and after it within the namespace's session gap.",
    )


class SearchResult(BaseModel):
    score: float = Field(
        description="Fused score in 0..1: 1.0 = best of the candidates in every channel that counted (weighted), "
        "or ranked first by every one (rrf)."
    )
    semantic_relevance: float | None = Field(description="Cosine similarity of query and memory.")
    signals: Signals
    memory: MemoryOut
    neighbours: list[MemoryOut] | None = Field(
        default=None, description="With `neighbours` > 0: the memories around this one in its session, in order."
    )
    contradicted_by: list[uuid.UUID] = Field(
        default_factory=list,
        description="Memories marked as contradicting this one and not yet resolved (memory_mark_contradiction).",
    )


class SearchMetrics(BaseModel):
    timings_ms: dict[str, float]
    matched_by: dict[str, int] = Field(description="How many results each channel found.")
    backend_failures: list[str]
    min_score_applied: bool
    candidates: dict[str, int] = Field(default_factory=dict, description="Candidates each retrieval channel produced.")
    weights: dict[str, float] = Field(default_factory=dict, description="The fusion weights of the channels used.")
    fusion: str = Field(default=DEFAULT_FUSION, description="How the channels were fused: `weighted` or `rrf`.")
    cues: dict[str, str] = Field(
        default_factory=dict, description="Intent, time cues and entities (names, comma-separated) read from the query."
    )
    stages: dict[str, str] = Field(
        default_factory=dict,
        description="The second stage: `rewrite` and `rerank`, each `ran`, `off` (the request said false), "
        "`unconfigured`, `skipped` (nothing to act on) or `failed` (first-stage results served); with `hops`, "
        "`hops`: `ran` (reached memories joined) or `skipped`.",
    )


class SearchOut(BaseModel):
    results: list[SearchResult]
    metrics: SearchMetrics
    # Only with `kinds` beyond memories (retrieval/kinds.py); null otherwise.
    messages: list[MessageHit] | None = Field(
        default=None, exclude_if=not_asked, description="With kinds including `messages`."
    )
    traces: list[TraceHit] | None = Field(
        default=None, exclude_if=not_asked, description="With kinds including `traces`."
    )
    entities: list[EntityHit] | None = Field(
        default=None, exclude_if=not_asked, description="With kinds including `entities`."
    )
