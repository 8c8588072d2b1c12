"""The one interface every observer implements: a session's messages in, its observation out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from memvault.extraction.base import EventText

# Items kept per list, and characters per item: an observation is read whole into a prompt.
MAX_ITEMS = 8
MAX_ITEM_CHARS = 300
MAX_SUMMARY_CHARS = 1200


@dataclass
class Notes:
    """What an observer made of a session."""

    summary: str
    topics: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    open_questions: list[str] = field(default_factory=list)

    def bounded(self) -> Notes:
        def items(values: list[str]) -> list[str]:
            kept = [v.strip()[:MAX_ITEM_CHARS] for v in values if v and v.strip()]
            return list(dict.fromkeys(kept))[:MAX_ITEMS]

        return Notes(
            summary=self.summary.strip()[:MAX_SUMMARY_CHARS],
            topics=items(self.topics),
            decisions=items(self.decisions),
            open_questions=items(self.open_questions),
        )


class Observer(Protocol):
    name: str

    async def observe(self, events: Sequence[EventText], previous: Notes | None) -> Notes:
        """The observation of one session from its messages in order (all roles); ``previous`` is
        what the last run wrote, for an observer that refines rather than starts again."""
        ...
