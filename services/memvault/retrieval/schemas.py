from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from memvault.memories.schemas import MemoryFilters, MemoryOut, Timestamp, no_nul


class SearchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: Annotated[str, Field(min_length=1, max_length=4000), AfterValidator(no_nul)]
    limit: int = Field(default=10, ge=1, le=100)
    filters: MemoryFilters | None = None
    min_score: float | None = Field(
        default=None, ge=-1, le=1, description="Drop results whose semantic_relevance (cosine) is below this."
    )
    knowledge_at: Timestamp = Field(default=None, description="Search what we knew at this time.")
    valid_at: Timestamp = Field(default=None, description="Search what was true in the world at this time.")

    @model_validator(mode="after")
    def _time_into_filters(self) -> SearchIn:
        # Top-level for convenience; the filters are what every read path applies.
        if self.knowledge_at is not None or self.valid_at is not None:
            f = self.filters or MemoryFilters()
            self.filters = f.model_copy(
                update={
                    "knowledge_at": self.knowledge_at or f.knowledge_at,
                    "valid_at": self.valid_at or f.valid_at,
                }
            )
        return self


class Signals(BaseModel):
    dense_rank: int | None = Field(description="Rank among vector candidates; null if not a vector candidate.")
    lexical_rank: int | None = Field(description="Rank among full-text candidates; null if no word matched.")
    lexical_score: float | None


class SearchResult(BaseModel):
    score: float = Field(description="Fused score, 1.0 = ranked first by every channel.")
    semantic_relevance: float | None = Field(description="Cosine similarity of query and memory.")
    signals: Signals
    memory: MemoryOut


class SearchMetrics(BaseModel):
    timings_ms: dict[str, float]
    matched_by: dict[str, int] = Field(description="How many results each channel found.")
    backend_failures: list[str]
    min_score_applied: bool


class SearchOut(BaseModel):
    results: list[SearchResult]
    metrics: SearchMetrics
