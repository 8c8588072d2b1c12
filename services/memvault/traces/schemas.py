from __future__ import annotations

import json
import uuid
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue, model_validator

from memvault.fields import Body, check_value
from memvault.memories.schemas import Content, FilterId, Metadata, OwnerId, _not_blank, no_nul
from memvault.retrieval.schemas import Signals

MAX_TASK_CHARS = 4000
MAX_TOOL_ARGS_BYTES = 16_384
# Tool output is the bulkiest part of a step (a file, a query result); big enough to be useful, small
# enough that replaying a long trace stays a reasonable response.
MAX_TOOL_RESULT_BYTES = 65_536
MAX_STEPS = 1000


class TraceStatus(StrEnum):
    open = "open"
    completed = "completed"


def _json_within(limit: int):  # type: ignore[no-untyped-def]
    def check(v: Any) -> Any:
        if v is None:
            return v
        # JSONB refuses NaN, NUL and unpaired surrogates: refuse them here instead of failing in the database.
        check_value(v)
        if len(json.dumps(v, ensure_ascii=False)) > limit:
            raise ValueError(f"is larger than {limit} bytes of JSON")
        return v

    return AfterValidator(check)


Task = Annotated[
    str, Field(min_length=1, max_length=MAX_TASK_CHARS), AfterValidator(no_nul), AfterValidator(_not_blank)
]
StepText = Annotated[str | None, Field(default=None, min_length=1, max_length=32_000), AfterValidator(no_nul)]
ToolName = Annotated[str | None, Field(default=None, min_length=1, max_length=200), AfterValidator(no_nul)]
ToolArgs = Annotated[JsonValue, _json_within(MAX_TOOL_ARGS_BYTES)]
ToolResult = Annotated[JsonValue, _json_within(MAX_TOOL_RESULT_BYTES)]


class TraceIn(Body):
    """Start a trace: the task an agent is about to work on."""

    model_config = ConfigDict(extra="forbid")

    task: Task = Field(description="What the agent set out to do; later traces are found by it.")
    user_id: OwnerId = None
    agent_id: OwnerId = None
    session_id: OwnerId = None
    metadata: Metadata = Field(default_factory=dict)


class TraceStepIn(Body):
    """One step of a trace: what the agent thought, did and saw. At least one field."""

    model_config = ConfigDict(extra="forbid")

    thought: StepText = Field(default=None, description="The reasoning before acting.")
    action: StepText = Field(default=None, description="What the agent did, in words.")
    observation: StepText = Field(default=None, description="What it saw as a result.")
    tool_name: ToolName = Field(default=None, description="The tool called, if any.")
    tool_args: ToolArgs = Field(default=None, description="The tool's arguments (any JSON).")
    tool_result: ToolResult = Field(default=None, description="What the tool returned (any JSON, or a string).")

    @model_validator(mode="after")
    def _not_empty(self) -> TraceStepIn:
        # TraceStepIn's own fields: an import's step record adds seq and time, which are not content.
        if all(getattr(self, name) is None for name in TraceStepIn.model_fields):
            raise ValueError(
                "a step needs at least one of thought, action, observation, tool_name, tool_args, tool_result"
            )
        return self


class TraceCompleteIn(Body):
    """How the task ended."""

    model_config = ConfigDict(extra="forbid")

    outcome: Content = Field(description="What came of it; searched together with the task.")
    success: bool = Field(description="Whether the task succeeded: search can ask for successful procedures only.")


class TraceStepOut(BaseModel):
    seq: int = Field(description="1, 2, 3 ... in the order the steps were recorded.")
    thought: str | None
    action: str | None
    observation: str | None
    tool_name: str | None
    tool_args: JsonValue
    tool_result: JsonValue
    at: datetime


class TraceOut(BaseModel):
    id: uuid.UUID
    namespace: str
    task: str
    status: TraceStatus
    outcome: str | None
    success: bool | None
    user_id: str | None
    agent_id: str | None
    session_id: str | None
    metadata: dict[str, Any]
    step_count: int
    embedding_model: str | None = Field(
        description="Model of the stored embedding; null if the embedder was down when it was written."
    )
    created_by: str
    started_at: datetime
    completed_at: datetime | None


class TraceDetail(TraceOut):
    steps: list[TraceStepOut] = Field(description="Every step, in order.")


class TracePage(BaseModel):
    data: list[TraceOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class TraceSearchIn(Body):
    guard_secrets = False  # never stored: it only selects what to read or forget

    model_config = ConfigDict(extra="forbid")

    query: Annotated[str, Field(min_length=1, max_length=4000), AfterValidator(no_nul), AfterValidator(_not_blank)]
    limit: int = Field(default=5, ge=1, le=50)
    success: bool | None = Field(default=None, description="Only traces that succeeded (true) or failed (false).")
    status: TraceStatus | None = None
    user_id: FilterId = None
    agent_id: FilterId = None


class TraceSearchResult(BaseModel):
    score: float = Field(description="Fused score, 1.0 = ranked first by every channel.")
    semantic_relevance: float | None = Field(description="Cosine similarity of query and trace; null without vectors.")
    signals: Signals
    trace: TraceDetail


class TraceSearchMetrics(BaseModel):
    timings_ms: dict[str, float]
    matched_by: dict[str, int] = Field(description="How many results each channel found.")
    backend_failures: list[str] = Field(description='["embedding"] when only full-text search could run.')


class TraceSearchOut(BaseModel):
    results: list[TraceSearchResult]
    metrics: TraceSearchMetrics
