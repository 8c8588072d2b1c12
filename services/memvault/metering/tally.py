"""What one operation used, counted where it happens and attributed to the operation's caller.

The metering gate (metering/meter.py) opens a Tally for each operation it admits; code deep
inside (an embedder counting tokens, a write counting its memories) adds to the open one with
``count``. The Tally is shared by reference, so work an operation hands to another task (a
gather, the job runner's embedder loop, which copies the context) still counts for it. No Tally
open (a warm-up, the CLI outside an operation): nothing is counted.

The door (``rest``, ``sdk``, ``mcp``, ``dashboard``) is set once per request by the door itself: a pure ASGI
middleware for REST (gateway/middleware.py), the MCP runtime for tool calls. A call with no door
(jobs, the scheduler, the CLI) is ``internal``: its work counts, it is not billed as a request.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Literal

Door = Literal["rest", "sdk", "mcp", "dashboard", "internal"]
DOORS: tuple[Door, ...] = ("rest", "sdk", "mcp", "dashboard", "internal")

# The units every bucket counts, in the order of the usage table's columns.
UNITS = ("requests", "memories_written", "searches", "events_ingested", "tokens_embedded", "bytes_stored")


@dataclass
class Tally:
    namespace: str | None = None
    memories_written: int = 0
    events_ingested: int = 0
    tokens_embedded: int = 0
    bytes_stored: int = 0
    # What monthly caps let the operation take ahead of its work (metering/meter.py), per month,
    # unit and whether Redis holds it; the meter puts what was used in its place when the call ends.
    taken: dict[tuple[datetime, str, bool], int] = field(default_factory=dict)


COUNTED = tuple(f.name for f in fields(Tally) if f.name not in ("namespace", "taken"))

_tally: ContextVar[Tally | None] = ContextVar("memvault_tally", default=None)
_door: ContextVar[Door] = ContextVar("memvault_door", default="internal")


def current_door() -> Door:
    return _door.get()


def current_tally() -> Tally | None:
    return _tally.get()


@contextmanager
def through(door: Door) -> Iterator[None]:
    """Calls made inside come through ``door``."""
    token = _door.set(door)
    try:
        yield
    finally:
        _door.reset(token)


@contextmanager
def tallying(tally: Tally) -> Iterator[Tally]:
    token = _tally.set(tally)
    try:
        yield tally
    finally:
        _tally.reset(token)


def count(
    *, memories_written: int = 0, events_ingested: int = 0, tokens_embedded: int = 0, bytes_stored: int = 0
) -> None:
    """Add to what the running operation used (nothing when none is being metered)."""
    tally = _tally.get()
    if tally is None:
        return
    tally.memories_written += memories_written
    tally.events_ingested += events_ingested
    tally.tokens_embedded += tokens_embedded
    tally.bytes_stored += bytes_stored


def note_namespace(name: str) -> None:
    """The namespace the running operation works in (the first one it opens)."""
    tally = _tally.get()
    if tally is not None and tally.namespace is None:
        tally.namespace = name


def estimated_tokens(texts: list[str]) -> int:
    """About how many tokens embedding ``texts`` takes (4 characters a word piece, as the
    embedding batcher estimates), to check a monthly cap before the model runs."""
    return sum(len(t) // 4 + 1 for t in texts)
