"""The context block: ranked memories packed greedily into a token budget and rendered as a
prompt-ready markdown block, grouped by type, each line with its date and provenance.

Token counts are estimated (about four characters per token for English text, rounded up): the
model that will read the block is the caller's, so no one tokenizer is right; the estimate errs
on the long side for ordinary prose, so a block rarely overruns a budget.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from memvault.fields import Body
from memvault.memories.schemas import MemoryFilters, MemoryOut, OwnerId, occurred
from memvault.observations.schemas import ObservationOut
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

# Heading per type, in the order sections appear when present.
SECTIONS = {
    "instruction": "Instructions",
    "preference": "Preferences",
    "decision": "Decisions",
    "task": "Tasks",
    "fact": "Facts",
    "event": "Events",
    "procedure": "Procedures",
    "entity": "Entities",
    "summary": "Summaries",
    "note": "Notes",
}
HEADER = "## What you remember"
TRUNCATION_MARK = " …"


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


class ContextIn(Body):
    guard_secrets = False  # never stored: it only selects what to read or forget

    model_config = ConfigDict(extra="forbid")

    query: str | None = Field(default=None, min_length=1, max_length=4000, description="What the context is for.")
    session_id: OwnerId = Field(default=None, description="The session to recall for (with its user's memories).")
    user_id: OwnerId = Field(default=None, description="The user to recall for.")
    token_budget: int = Field(default=1500, ge=50, le=32000, description="Upper bound of the block's tokens.")
    limit: int = Field(default=30, ge=1, le=100, description="Candidates to consider.")
    filters: MemoryFilters | None = None
    kinds: Annotated[list[Kind], AfterValidator(unique_kinds)] = Field(
        default_factory=lambda: list(DEFAULT_KINDS),
        max_length=len(Kind),
        description=KINDS_DESCRIPTION + " Kinds other than memories need a query.",
    )

    @model_validator(mode="after")
    def _something_to_recall(self) -> ContextIn:
        if self.query is None and self.session_id is None and self.user_id is None:
            raise ValueError("give a query, a session_id or a user_id")
        return self


class ContextOut(BaseModel):
    context: str = Field(description="Markdown, ready to put in a prompt.")
    tokens: int = Field(description="Estimated tokens of `context` (about 4 characters each).")
    token_budget: int
    memory_ids: list[uuid.UUID] = Field(description="The memories included, in rank order.")
    truncated: bool = Field(description="True when the top memory alone exceeded the budget and was shortened.")
    omitted: int = Field(description="Ranked memories left out for lack of budget.")
    session_observation: bool = Field(
        default=False,
        exclude_if=not_asked,
        description="True when the block opens with the session's observation (summary, decisions, open questions).",
    )
    messages: list[MessageHit] | None = Field(
        default=None, exclude_if=not_asked, description="With kinds including `messages`."
    )
    traces: list[TraceHit] | None = Field(
        default=None, exclude_if=not_asked, description="With kinds including `traces`."
    )
    entities: list[EntityHit] | None = Field(
        default=None, exclude_if=not_asked, description="With kinds including `entities`."
    )


@dataclass
class Line:
    memory: MemoryOut
    text: str


def line_for(m: MemoryOut) -> str:
    when = occurred(m)
    owner = f", {m.user_id}" if m.user_id else ""
    source = f", session {m.session_id}" if m.session_id and m.scope == "session" else ""
    return f"- {m.content} ({when.date().isoformat()}; {m.scope}{owner}{source}; id {str(m.id)[:8]})"


def render(lines: list[Line]) -> str:
    if not lines:
        return f"{HEADER}\n\nNothing relevant is stored yet."
    by_type: dict[str, list[str]] = {}
    for ln in lines:
        by_type.setdefault(ln.memory.type.value, []).append(ln.text)
    parts = [HEADER]
    for type_, heading in SECTIONS.items():
        if type_ in by_type:
            parts.append(f"\n### {heading}\n" + "\n".join(by_type[type_]))
    return "\n".join(parts)


def pack(ranked: list[MemoryOut], budget: int) -> ContextOut:
    """Greedy by rank: each memory goes in if the block still fits. The top memory is never
    dropped: if it alone is too long, its content is shortened (and `truncated` says so)."""
    chosen: list[Line] = []
    truncated = False
    for i, m in enumerate(ranked):
        candidate = [*chosen, Line(m, line_for(m))]
        if estimate_tokens(render(candidate)) <= budget:
            chosen = candidate
            continue
        if i == 0:
            chosen, truncated = [_shortened(m, budget)], True
    block = render(chosen)
    return ContextOut(
        context=block,
        tokens=estimate_tokens(block),
        token_budget=budget,
        memory_ids=[ln.memory.id for ln in chosen],
        truncated=truncated,
        omitted=len(ranked) - len(chosen),
    )


def _shortened(m: MemoryOut, budget: int) -> Line:
    full = line_for(m)
    overhead = estimate_tokens(render([Line(m, full.replace(m.content, ""))]))
    room = max(0, (budget - overhead) * 4 - len(TRUNCATION_MARK))
    short = m.content[:room].rstrip() + TRUNCATION_MARK
    return Line(m, line_for(m.model_copy(update={"content": short})))


# ---- the session's observation and other kinds, around the memories (issue 28) ----------------

SESSION_HEADER = "## This session"
# The observation takes at most this share of the budget; the memories keep the rest.
OBSERVATION_SHARE = 3
LINE_CHARS = 200


def _short(text: str, chars: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= chars else text[:chars].rstrip() + TRUNCATION_MARK


def observation_block(o: ObservationOut, budget: int) -> str:
    """The session's observation, compactly: its summary, then decisions and open questions while
    they fit ``budget`` tokens (a summary too long alone is shortened)."""
    room = max(budget // OBSERVATION_SHARE, 20)
    lines = [SESSION_HEADER, _short(o.summary, room * 4 - len(SESSION_HEADER) - 1)]
    for label, items in (("Decision", o.decisions), ("Open question", o.open_questions)):
        for item in items:
            line = f"- {label}: {_short(item, LINE_CHARS)}"
            if estimate_tokens("\n".join([*lines, line])) > room:
                break
            lines.append(line)
    return "\n".join(lines)


def kind_lines(hits: dict[str, Any]) -> list[str]:
    """A line per hit of the other kinds asked for, tagged with its kind: messages, traces, then
    entities, each best first."""
    sections: list[str] = []
    for m in hits.get("messages") or []:
        sections.append(
            f"- [message {m.timestamp.date().isoformat()}, session {m.session_id}, {m.role}] "
            + _short(m.content, LINE_CHARS)
        )
    for t in hits.get("traces") or []:
        ended = "" if t.outcome is None else f" → {_short(t.outcome, LINE_CHARS // 2)}"
        sections.append(f"- [trace] {_short(t.task, LINE_CHARS)}{ended}")
    for e in hits.get("entities") or []:
        sections.append(f"- [entity] {e.name} ({e.type})")
    return sections


def assemble(observation: str | None, packed: ContextOut, extra: list[str], budget: int) -> ContextOut:
    """The block: the observation first, the packed memories, then other kinds' lines while they fit."""
    parts = [observation] if observation else []
    parts.append(packed.context)
    block = "\n\n".join(parts)
    if extra:
        added = "\n\n### Related"
        for line in extra:
            if estimate_tokens(block + added + "\n" + line) > budget:
                break
            added += "\n" + line
        if added != "\n\n### Related":
            block += added
    return packed.model_copy(
        update={"context": block, "tokens": estimate_tokens(block), "session_observation": observation is not None}
    )
