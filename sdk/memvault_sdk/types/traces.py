from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from memvault_sdk.types._model import Model, Params
from memvault_sdk.types.search import Signals

TraceStatus = Literal["open", "completed"]


class TraceCreate(Params):
    task: str
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    metadata: dict[str, Any] | None = None


class TraceStepCreate(Params):
    thought: str | None = None
    action: str | None = None
    observation: str | None = None
    tool_name: str | None = None
    tool_args: Any = None
    tool_result: Any = None


class TraceComplete(Params):
    outcome: str
    success: bool


class TraceSearchParams(Params):
    query: str
    limit: int | None = None
    success: bool | None = None
    status: TraceStatus | None = None
    user_id: str | None = None
    agent_id: str | None = None


class TraceStep(Model):
    seq: int
    thought: str | None = None
    action: str | None = None
    observation: str | None = None
    tool_name: str | None = None
    tool_args: Any = None
    tool_result: Any = None
    at: datetime


class Trace(Model):
    id: str
    namespace: str
    task: str
    status: str
    outcome: str | None = None
    success: bool | None = None
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    step_count: int
    embedding_model: str | None = None
    created_by: str
    started_at: datetime
    completed_at: datetime | None = None


class TraceDetail(Trace):
    steps: list[TraceStep]


class TraceSearchResult(Model):
    score: float
    semantic_relevance: float | None = None
    signals: Signals
    trace: TraceDetail


class TraceSearchMetrics(Model):
    timings_ms: dict[str, float]
    matched_by: dict[str, int]
    backend_failures: list[str]


class TraceSearchResponse(Model):
    results: list[TraceSearchResult]
    metrics: TraceSearchMetrics
