"""The rule-based observer: no network, no model, deterministic.

- decisions: the statements the rule-based extractor classifies as decisions;
- open questions: questions a user or participant asked that nothing answered (the session's last
  messages), and statements that say something is still undecided ("not sure yet", "we still need
  to decide", "open question", "TBD");
- topics: the names the session mentions most, else its most frequent longer words;
- summary: how many messages, who took part, over which dates, its topics and what it opened with.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from memvault.extraction.base import EventText
from memvault.extraction.rules import MINED_ROLES, RuleExtractor, find_entities, statements
from memvault.observations.base import Notes

TOPICS = 5
OPENING_CHARS = 160

_UNDECIDED = re.compile(
    r"\b(?:not sure(?: yet)?|undecided|(?:haven't|have not|hasn't|not yet) (?:decided|settled|figured)|"
    r"(?:still|yet) (?:need|have) to (?:decide|figure out|find out|choose|check)|open question|tbd|"
    r"to be decided|unclear|wondering (?:whether|if)|(?:don't|do not) know (?:yet|whether|if))\b",
    re.I,
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{4,}")
_COMMON_TEXT = """
    about after again being below could doesn't don't every going great hello might never other really
    should still thank thanks there these thing things think those through today tomorrow would yesterday
    where which while whose want wants maybe because before since their them they this that with what
    when your yours please sure right something anything nothing everything also just like
"""
_COMMON = set(_COMMON_TEXT.split())


def _mined(events: Sequence[EventText]) -> list[EventText]:
    return [e for e in events if e.role in MINED_ROLES]


def _open_questions(events: Sequence[EventText]) -> list[str]:
    found: list[str] = []
    for e in _mined(events):
        found += [s for s in statements(e.content) if _UNDECIDED.search(s) and not s.endswith("?")]
    # A question is open when no one spoke after it: the tail of the session after its last answer.
    tail: list[EventText] = []
    for e in reversed(events):
        if e.role not in MINED_ROLES:
            break
        tail.insert(0, e)
    for e in tail:
        found += [s for s in statements(e.content) if s.endswith("?")]
    return found


def _topics(events: Sequence[EventText]) -> list[str]:
    names: Counter[str] = Counter()
    shown: dict[str, str] = {}
    for e in _mined(events):
        for s in statements(e.content):
            for name, _ in find_entities(s, e.speaker):
                names[name.lower()] += 1
                shown.setdefault(name.lower(), name)
    if names:
        return [shown[n] for n, _ in names.most_common(TOPICS)]
    words = Counter(w.lower() for e in _mined(events) for w in _WORD.findall(e.content) if w.lower() not in _COMMON)
    return [w for w, _ in words.most_common(TOPICS)]


def _summary(events: Sequence[EventText], topics: list[str]) -> str:
    first, last = events[0].occurred_at.date(), events[-1].occurred_at.date()
    span = first.isoformat() if first == last else f"{first.isoformat()} to {last.isoformat()}"
    who = list(dict.fromkeys(e.speaker or e.role for e in events))
    parts = [f"{len(events)} messages between {', '.join(who)} ({span})."]
    if topics:
        parts.append(f"About {', '.join(topics)}.")
    opening = next((e.content.strip() for e in _mined(events) if e.content.strip()), None)
    if opening:
        short = opening if len(opening) <= OPENING_CHARS else opening[:OPENING_CHARS].rstrip() + " …"
        parts.append(f'It opened with: "{short}"')
    return " ".join(parts)


class RuleObserver:
    name = "rules"

    async def observe(self, events: Sequence[EventText], previous: Notes | None) -> Notes:
        if not events:
            return previous or Notes(summary="No messages yet.")
        candidates = await RuleExtractor().extract(events)
        topics = _topics(events)
        return Notes(
            summary=_summary(events, topics),
            topics=topics,
            decisions=[c.content for c in candidates if c.type == "decision"],
            open_questions=_open_questions(events),
        ).bounded()
