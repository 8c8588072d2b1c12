"""What a first-stage search gives back: hits with their explanation, and the metrics around them."""

from __future__ import annotations

from dataclasses import dataclass, field

from memvault.memories.models import Memory


@dataclass
class Hit:
    memory: Memory
    score: float
    semantic_relevance: float | None
    dense_rank: int | None
    lexical_rank: int | None
    lexical_score: float | None
    # channel -> (its rank, its value) for every channel that took part
    channels: dict[str, tuple[int | None, float | None]] = field(default_factory=dict)
    # Its vector in pgvector's binary form, read with it when the timeline acts (sql/timeline.py);
    # None otherwise. Kept as read: only the hits the timeline compares are decoded.
    vector: bytes | None = None


def matched_by(hits: list[Hit]) -> dict[str, int]:
    """How many of ``hits`` each retrieval channel found. Counted on what a search returns, after
    ``min_score`` and the reranker, which leave fewer than the first stage fetched."""
    return {
        "dense": sum(1 for h in hits if h.dense_rank is not None),
        "lexical": sum(1 for h in hits if h.lexical_rank is not None),
    }


@dataclass
class SearchOutcome:
    hits: list[Hit]
    candidates: dict[str, int] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    fusion: str = "rrf"
    timings_ms: dict[str, float] = field(default_factory=dict)
    backend_failures: list[str] = field(default_factory=list)
    # What a time cue did (retrieval/timeline.py), for metrics.cues.
    cues: dict[str, str] = field(default_factory=dict)
