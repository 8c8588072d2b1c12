"""What a query says beyond its words: the kind of memory it asks for (intent) and when (time cues).

Rule-based on purpose: a few regular expressions run in microseconds on the request path, are
explainable in `metrics.cues`, and can be reasoned about in tests. Cues only add ranked channels
to the fusion; they never filter, so a wrong guess costs a little rank, never a result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

# Checked in order; the first that matches wins. Decisions before preferences: "we agreed we
# prefer ..." asks what was decided.
INTENTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("decision", re.compile(r"\b(decide[ds]?|deciding|decision|agreed?|agreement|chose|chosen)\b")),
    (
        "preference",
        re.compile(r"\b(likes?|liked|prefers?|preferred|preference|favou?rites?|loves?|dislikes?|hates?)\b"),
    ),
    ("instruction", re.compile(r"\b(always|never|should|must|rules?)\b")),
    ("task", re.compile(r"\b(todo|to-do|to do|need to|needs to|remind|reminder|pending)\b")),
    ("event", re.compile(r"\b(when|what date|what day|what time)\b")),
)
NEWEST = re.compile(r"\b(latest|currently|current|now|nowadays|these days|most recent(ly)?|newest|last time)\b")
OLDEST = re.compile(r"\b(first|originally|initially|earliest|at first|in the beginning)\b")

MONTHS = {
    m: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for m in names
}
_MONTH = r"(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})\b")
MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b")
MONTH_YEAR = re.compile(rf"\b(?:in|during|of|since)?\s*{_MONTH},?\s+(\d{{4}})\b")
# A bare month needs a preposition: "may" alone is a verb far more often than a month.
MONTH_ALONE = re.compile(rf"\b(?:in|during|last)\s+{_MONTH}(?!\s*\d)\b")
YEAR = re.compile(r"\b(?:in|during|of|since)\s+((?:19|20)\d{2})\b")
RELATIVE = re.compile(r"\b(yesterday|today|last (week|month|year)|this (week|month|year))\b")
AGO = re.compile(r"\b(\d{1,3}|a|one|two|three) (day|week|month|year)s? ago\b")
SMALL = {"a": 1, "one": 1, "two": 2, "three": 3}


@dataclass(frozen=True)
class QueryCues:
    intent: str | None = None
    order: Literal["newest", "oldest"] | None = None
    window: tuple[datetime, datetime] | None = None  # [start, end) in UTC

    def describe(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.intent:
            out["intent"] = self.intent
        if self.order:
            out["order"] = self.order
        if self.window:
            out["window"] = f"{self.window[0].isoformat()}/{self.window[1].isoformat()}"
        return out


def analyse(query: str, reference_time: datetime | None = None) -> QueryCues:
    q = " ".join(query.lower().split())
    ref = (reference_time or datetime.now(UTC)).astimezone(UTC)
    intent = next((name for name, pattern in INTENTS if pattern.search(q)), None)
    window = date_window(q, ref)
    order: Literal["newest", "oldest"] | None = None
    if window is None:
        order = "newest" if NEWEST.search(q) else "oldest" if OLDEST.search(q) else None
    return QueryCues(intent=intent, order=order, window=window)


def _day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


def _month(y: int, m: int) -> tuple[datetime, datetime]:
    return _day(y, m, 1), (_day(y + 1, 1, 1) if m == 12 else _day(y, m + 1, 1))


def _add_months(y: int, m: int, delta: int) -> tuple[int, int]:
    n = y * 12 + (m - 1) + delta
    return n // 12, n % 12 + 1


def date_window(q: str, ref: datetime) -> tuple[datetime, datetime] | None:
    """The period a query names, most specific form first; None if it names none, or one that
    Python's dates cannot hold: "31 February 2023", "in December 9999" (ends in year 10000), "last
    week" of 0001-01-01. A cue only ranks, so no window is the right answer, never an error."""
    try:
        return _window(q, ref)
    except (ValueError, OverflowError):
        return None


def _window(q: str, ref: datetime) -> tuple[datetime, datetime] | None:
    today = _day(ref.year, ref.month, ref.day)
    if m := DAY_MONTH_YEAR.search(q):
        start = _day(int(m.group(3)), MONTHS[m.group(2)], int(m.group(1)))
        return start, start + timedelta(days=1)
    if m := MONTH_DAY_YEAR.search(q):
        start = _day(int(m.group(3)), MONTHS[m.group(1)], int(m.group(2)))
        return start, start + timedelta(days=1)
    if m := MONTH_YEAR.search(q):
        return _month(int(m.group(2)), MONTHS[m.group(1)])
    if m := RELATIVE.search(q):
        word = m.group(1)
        week_start = today - timedelta(days=today.weekday())
        if word == "yesterday":
            return today - timedelta(days=1), today
        if word == "today":
            return today, today + timedelta(days=1)
        if word == "last week":
            return week_start - timedelta(days=7), week_start
        if word == "this week":
            return week_start, week_start + timedelta(days=7)
        if word == "last month":
            return _month(*_add_months(ref.year, ref.month, -1))
        if word == "this month":
            return _month(ref.year, ref.month)
        if word == "last year":
            return _day(ref.year - 1, 1, 1), _day(ref.year, 1, 1)
        return _day(ref.year, 1, 1), _day(ref.year + 1, 1, 1)
    if m := AGO.search(q):
        n = SMALL.get(m.group(1)) or int(m.group(1))
        unit = m.group(2)
        if unit == "day":
            start = today - timedelta(days=n)
            return start, start + timedelta(days=1)
        if unit == "week":
            start = today - timedelta(days=7 * n + today.weekday())
            return start, start + timedelta(days=7)
        if unit == "month":
            return _month(*_add_months(ref.year, ref.month, -n))
        return _day(ref.year - n, 1, 1), _day(ref.year - n + 1, 1, 1)
    if m := MONTH_ALONE.search(q):
        month = MONTHS[m.group(1)]
        # The latest such month that has begun by the reference time.
        year = ref.year if month <= ref.month else ref.year - 1
        return _month(year, month)
    if m := YEAR.search(q):
        y = int(m.group(1))
        return _day(y, 1, 1), _day(y + 1, 1, 1)
    return None
