"""What a search asks of retrieval, in one object: the facade (retrieval/service.py) builds a
``SearchPlan`` per request and ``hybrid.hybrid_search`` answers it with hits.

A plan is plain values. Which of them decide the statement's SQL and which are only its
parameters is sql/shape.py's business."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from memvault.memories.schemas import MemoryFilters
from memvault.retrieval.cues import QueryCues
from memvault.retrieval.lexical import TermStats


@dataclass(frozen=True)
class NamedEntities:
    """Entities the query names (graph distance 0) and those one relation away (distance 1)."""

    named: tuple[uuid.UUID, ...] = ()
    related: tuple[uuid.UUID, ...] = ()
    names: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.named or self.related)


@dataclass(frozen=True)
class SearchPlan:
    """One first-stage search: the query, its vector and words, whose memories, how the channels
    are weighed and fused, and how many rows each stage keeps.

    ``fusion="rrf"``: weighted reciprocal rank; the priors (recency, importance, access,
    strength) and the order cue rank only the retrieval head (the best ``head`` on retrieval
    alone), cues (intent, graph, time window) rank every candidate they match.
    ``fusion="weighted"``: the weighted mean of each channel's value scaled to 0..1 over the
    candidates (relative score fusion).

    ``small_chain``: the filters read as a user or in a session whose scope chain is small
    (retrieval/chain.py): the lexical channel scores the reader's own rows directly.

    ``settings_set``: the transaction opened with ``sql.settings.search_settings(filters,
    candidates)``, so they cost no round trip of their own."""

    # Whose memories.
    tenant_id: uuid.UUID
    namespace_id: uuid.UUID
    # The query: its text, its vector (None: words only), the model that made the vector.
    query: str
    query_vector: list[float] | None
    model_id: str
    filters: MemoryFilters | None = None
    # Stages: rows fetched, candidates per channel, the retrieval head the priors rank.
    limit: int = 10
    candidates: int = 50
    head: int = 10
    # Weights and fusion.
    weights: dict[str, float] | None = None
    fusion: str = "rrf"
    # What the query says beside its words, and what the namespace knows of them.
    cues: QueryCues | None = None
    entities: NamedEntities | None = None
    terms: TermStats | None = None
    # Signals' time.
    reference_time: datetime | None = None
    half_life_days: float = 30.0
    strength_half_life_days: float = 30.0
    small_chain: bool = False
    settings_set: bool = False
    # Issue 30: the longest pause within an inferred conversation (sql/inferred.py); 0: none inferred.
    session_gap_minutes: float = 0.0
