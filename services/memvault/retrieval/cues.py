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
# Order cues: the ways people ask for the newest or the oldest version of a fact. Each phrase is
# checked after NOT_TIME has blanked the idioms that share its words ("now that I think of it",
# "first aid", "current account"), so that they carry no cue. tests/retrieval/test_cues.py holds
# the table of phrasings.
NEWEST = re.compile(
    r"\b(latest|currently|current|now|nowadays|these days|this days|at the moment|at present|presently|"
    r"as things stand|as it stands|as of (now|today)|most recent(ly)?|newest|last time|still|anymore|any more|"
    r"ended up|up to date|up-to-date|today|by now)\b"
)
OLDEST = re.compile(
    r"\b(first|firstly|originally|original|initially|initial|earliest|at first|in the beginning|"
    r"at the (start|beginning|outset)|to (begin|start) with|used to|back then|in the early days|"
    # "use to live", not "use to make" (what for).
    r"use to (live|work|be|have|play|run|stay)|"
    r"start(ed)? out|started with|start with|begin with|began with|from the start|way back|"
    r"start(ed)? (his|her|their|my|your|our) (career|job|life)|the (original|first) one)\b"
)
# "before the change" asks for the first version, not for the one before an event.
BEFORE_ALL = re.compile(
    r"\bbefore (the|any|all( of)? the|every|all) (changes?|switch(es)?|moves?|migrations?|that changed)\b"
)
NOT_TIME = re.compile(
    r"\b(now that|now and (then|again)|from now on|just now|every now|until now|up (un)?til now|"
    r"first (name|names|aid|glance|sight|class|place|prize|person|hand|of all|thing|time ever)|first-\w+|"
    r"firsthand|current (account|accounts|affairs)|electric current|ocean currents?|(stand|sit|stay|hold) still|"
    r"still life|still water|the day (before|after)|after all|before long|ever after|happily ever|"
    r"after (a|some) (long |short )?(time|while))\b"
)
AS_OF = re.compile(r"\b(as (of|at)|today)\b")
# "before / after <event>": the version just before or after the one the event names (the first
# memory that says its words). A date there is read as a window instead, as it always was.
RELATIVE_EVENT = re.compile(r"\b(before|after|prior to|since leaving|since moving)\s+(.+)$")
# Words that never name an event ("before she moved to Lisbon": she, to). Kept short on purpose: a
# common word in the event is harmless, it only has to be rarer among the subject's memories than
# the word that names the version.
EVENT_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "to",
        "from",
        "of",
        "in",
        "on",
        "at",
        "for",
        "with",
        "by",
        "into",
        "onto",
        "and",
        "or",
        "but",
        "he",
        "she",
        "they",
        "it",
        "we",
        "i",
        "you",
        "his",
        "her",
        "their",
        "its",
        "our",
        "my",
        "your",
        "him",
        "them",
        "us",
        "me",
        "this",
        "that",
        "these",
        "those",
        "was",
        "were",
        "is",
        "are",
        "be",
        "been",
        "being",
        "did",
        "do",
        "does",
        "had",
        "has",
        "have",
        "then",
        "there",
        "where",
        "which",
        "who",
        "what",
        "when",
        "how",
        "why",
        "all",
        "any",
        "some",
        "one",
    ]
)

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
ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
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
    # "before / after <event>": which, and the event's words (stemmed).
    relative: Literal["before", "after"] | None = None
    event: tuple[str, ...] = ()
    # The window is one day named as such ("on 13 October 2023"), not "as of" it: what happened
    # that day, never the state then (retrieval/timeline.py).
    day: bool = False

    @property
    def timeline(self) -> bool:
        """A cue the timeline answers (retrieval/timeline.py): it orders the subject's versions."""
        return self.order is not None or self.window is not None or self.relative is not None

    @property
    def fused_window(self) -> bool:
        """A window ranks in the fusion as before ("what did we ship in March", "as of 1 May":
        whatever is dated in it, about anyone); the timeline only steps in when nothing is."""
        return self.window is not None

    def describe(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.intent:
            out["intent"] = self.intent
        if self.order:
            out["order"] = self.order
        if self.window:
            out["window"] = f"{self.window[0].isoformat()}/{self.window[1].isoformat()}"
        if self.day:
            # Read as what happened that day, never as the state then.
            out["day"] = "event"
        if self.relative:
            out["relative"] = self.relative
            out["event"] = " ".join(self.event)
        return out


def analyse(query: str, reference_time: datetime | None = None) -> QueryCues:
    q = " ".join(query.lower().split())
    ref = (reference_time or datetime.now(UTC)).astimezone(UTC)
    intent = next((name for name, pattern in INTENTS if pattern.search(q)), None)
    timed = NOT_TIME.sub(" ", q)
    if BEFORE_ALL.search(timed):
        return QueryCues(intent=intent, order="oldest")
    if relative := relative_event(timed, ref):
        return QueryCues(intent=intent, relative=relative[0], event=relative[1])
    window = date_window(q, ref)
    order: Literal["newest", "oldest"] | None = None
    if window is None:
        # Oldest first: "what did she use to do before the change" says both "used to" and nothing newer.
        order = "oldest" if OLDEST.search(timed) else "newest" if NEWEST.search(timed) else None
    return QueryCues(intent=intent, order=order, window=window, day=event_day(q, window))


def event_day(q: str, window: tuple[datetime, datetime] | None) -> bool:
    """A window of one day that the query does not ask "as of" (or "today", which is now): "what
    did Gina find on 1 February 2023" asks what happened that day; "as of 1 February 2023, where
    did Ana live" and "which tool does the team deploy with today" ask the state then."""
    return window is not None and window[1] - window[0] <= timedelta(days=1) and AS_OF.search(q) is None


def stem(word: str) -> str:
    """A crude stem, enough to match an event's words with a memory's: moving, moved, move -> mov."""
    for suffix in ("ing", "ed", "es", "e", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9][a-z0-9.+#-]*[a-z0-9+#]|[a-z0-9]", text.lower())


def words_of(text: str) -> set[str]:
    """A text's words, stemmed: what an event's words are looked for in."""
    return {stem(w) for w in tokens(text)}


def relative_event(q: str, ref: datetime) -> tuple[Literal["before", "after"], tuple[str, ...]] | None:
    """("before" or "after", the event's words) for "... before <event>", "after <event>"; None
    when the event says nothing ("before that", "after it") or is a date (a window)."""
    m = RELATIVE_EVENT.search(q)
    if m is None:
        return None
    which: Literal["before", "after"] = "after" if m.group(1).startswith(("after", "since")) else "before"
    rest = m.group(1).split()[1] + " " + m.group(2) if m.group(1).startswith("since") else m.group(2)
    # A date is a window, not an event ("the week before 16 November 2023"): read as ever.
    if date_window(f"in {rest}", ref):
        return None
    # The event ends with its clause: "after leaving Osaka, where did she go" -> "leaving osaka".
    rest = re.split(r"[,;:?!]|\. ", rest)[0]
    event = tuple(dict.fromkeys(stem(w) for w in tokens(rest) if w not in EVENT_STOP and not w.isdigit()))
    return (which, event) if event else None


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
    if m := ISO_DAY.search(q):
        start = _day(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        return start, start + timedelta(days=1)
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
