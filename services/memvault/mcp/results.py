"""What a search, a recall or a write hands back to a model: the few fields it reads, in few tokens.

The SDK renders a returned model twice, as pretty-printed JSON text with every null field and as
structured content, and a client sends its model one or both on every turn. A search used to cost
about 5,000 tokens for ten one-line memories (every field of every memory, the ten-channel
breakdown); a hit is now id, content, type, date and score (its key when it has one), and the
breakdown comes only with `explain: true`. tests/mcp/test_budgets.py holds both under 600 tokens.
A write (memory_store, the most frequent call) handed back every field of the memory, 24 of them
pretty-printed, about 220 tokens as text; it now hands back what the model may refer to again
(``Written``), under 80 (the same test); a page of memory_list the same and when each was stored.
memory_get still reads the whole memory.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any, TypeVar

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from memvault.memories.schemas import MemoryOut, MemoryPage, MemoryState, MemoryType, ScopeLevel, occurred
from memvault.retrieval.context import ContextOut
from memvault.retrieval.kinds import EntityHit, MessageHit, TraceHit
from memvault.retrieval.schemas import SearchMetrics, SearchOut, Signals


class Hit(BaseModel):
    id: uuid.UUID
    content: str
    type: MemoryType
    date: dt.date = Field(description="When it became true (valid_from), else when it was stored.")
    score: float = Field(description="0..1, relative to the other candidates; 1 is the best match.")
    key: str | None = Field(default=None, description="Its stable key, when it has one.")
    contradicted_by: list[uuid.UUID] | None = Field(
        default=None, description="Memories marked as contradicting it, while that is not resolved."
    )
    # With explain: true only.
    scope: ScopeLevel | None = None
    user_id: str | None = None
    session_id: str | None = None
    semantic_relevance: float | None = Field(default=None, description="Cosine of query and memory.")
    signals: Signals | None = Field(default=None, description="Each channel's rank and value.")


class Hits(BaseModel):
    results: list[Hit] = Field(description="Best first.")
    metrics: SearchMetrics | None = Field(default=None, description="With explain: true, how the search ran.")
    # With kinds naming them only.
    messages: list[MessageHit] | None = None
    traces: list[TraceHit] | None = None
    entities: list[EntityHit] | None = None


W = TypeVar("W", bound="Written")


class Written(BaseModel):
    """A memory as a write leaves it: what names it, what it says, whose it is, what it replaced."""

    id: uuid.UUID
    namespace: str | None = Field(description="Null for tenant- and system-scope memories.")
    content: str
    type: MemoryType
    scope: ScopeLevel
    state: MemoryState
    importance: float
    confidence: float
    key: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    valid_from: dt.datetime | None = None
    metadata: dict[str, Any] | None = None
    supersedes: uuid.UUID | None = Field(default=None, description="The version it replaced (same key).")


def written(m: MemoryOut) -> CallToolResult:
    """``m`` as ``Written``, leaving out what is empty (no owner, no metadata, nothing replaced)."""
    return compact(_lean(m, Written))


def _lean(m: MemoryOut, model: type[W]) -> W:
    """``m`` as ``model``, its empty metadata as none (left out with the other empty fields)."""
    kept = m.model_dump(include=set(model.model_fields))
    return model.model_validate({**kept, "metadata": kept["metadata"] or None})


class Listed(Written):
    """A memory as a listing shows it: as a write leaves it, and when it was stored."""

    recorded_at: dt.datetime


class Page(BaseModel):
    data: list[Listed] = Field(description="Newest first.")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


def page(out: MemoryPage) -> CallToolResult:
    """A page of memories, each as ``Listed`` without what is empty: the whole record (24 fields,
    about 230 tokens a memory) made a page of 20 cost a model 4,000 tokens to browse."""
    return compact(Page(data=[_lean(m, Listed) for m in out.data], next_cursor=out.next_cursor))


def hits(out: SearchOut, *, explain: bool = False) -> Hits:
    results = []
    for r in out.results:
        m = r.memory
        hit = Hit(
            id=m.id,
            content=m.content,
            type=m.type,
            date=occurred(m).date(),
            score=round(r.score, 3),
            key=m.key,
            contradicted_by=r.contradicted_by or None,
        )
        if explain:
            hit = hit.model_copy(
                update={
                    "scope": m.scope,
                    "user_id": m.user_id,
                    "session_id": m.session_id,
                    "semantic_relevance": r.semantic_relevance,
                    "signals": r.signals,
                }
            )
        results.append(hit)
    return Hits(
        results=results,
        metrics=out.metrics if explain else None,
        messages=out.messages,
        traces=out.traces,
        entities=out.entities,
    )


def compact(model: BaseModel) -> CallToolResult:
    """The model as structured content without the null fields it may leave out, and as one line of
    the same JSON."""
    return _as_json(_without_optional_nulls(model, model.model_dump(mode="json")))


def one_line(model: BaseModel) -> CallToolResult:
    """The model as the SDK hands it back (every field, as structured content), with its text as
    one line of the same JSON rather than the SDK's indented rendering: memory_get's answer 200 →
    173 tokens, memory_forget's 36 → 28, for the same reading. Nulls stay: one can say something
    ("installed": null, the server cannot see the client's files)."""
    return _as_json(model.model_dump(mode="json", by_alias=True))


def _as_json(data: dict[str, Any]) -> CallToolResult:
    """``data`` as structured content and as one line of the same JSON."""
    return CallToolResult(content=[TextContent(type="text", text=_json(data))], structured_content=data)


def _without_optional_nulls(model: BaseModel, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (``model`` dumped) without the nulls of fields that have a default, at every depth.
    A null that the model requires stays: the output schema is checked against what is sent, and
    dropping every null (a hit's `lexical_rank` when no word matched) failed each such search."""
    fields = type(model).model_fields
    for key in list(data):
        value, dumped = getattr(model, key, None), data[key]
        if dumped is None and key in fields and not fields[key].is_required():
            del data[key]
        elif isinstance(value, BaseModel) and isinstance(dumped, dict):
            _without_optional_nulls(value, dumped)
        elif isinstance(value, list | tuple) and isinstance(dumped, list):
            for item, part in zip(value, dumped, strict=False):
                if isinstance(item, BaseModel) and isinstance(part, dict):
                    _without_optional_nulls(item, part)
        elif isinstance(value, dict) and isinstance(dumped, dict):
            for k, item in value.items():
                if isinstance(item, BaseModel) and isinstance(dumped.get(str(k)), dict):
                    _without_optional_nulls(item, dumped[str(k)])
    return data


def context(out: ContextOut) -> CallToolResult:
    """The block as text (what a model reads, with no JSON around it) and the whole answer as data."""
    text = out.context
    if out.omitted:
        text += f"\n\n({out.omitted} more relevant memories did not fit in {out.token_budget} tokens.)"
    # Other kinds, when asked for, follow the block as one line of JSON each (the model reads the text).
    for kind in ("messages", "traces", "entities"):
        found = getattr(out, kind)
        if found is not None:
            text += f"\n\n{kind}: " + _json([hit.model_dump(mode="json") for hit in found])
    data = out.model_dump(mode="json")
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
