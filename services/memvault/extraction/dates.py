"""Relative and absolute date expressions, resolved against the time a message was said.

"yesterday" said on 2024-05-08 is 2024-05-07; "next month" is 2024-06 (stored as its first day,
with the granularity beside it). Week-based phrases use ISO weeks (Monday first). "next Friday"
is the first Friday after the message's day, "last Friday" the last one before it.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

Granularity = Literal["day", "week", "month", "year"]
# Whether a statement looks ahead or tells what happened; None when it says neither.
Tense = Literal["future", "past"] | None

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH_ABBR = {m[:3]: i + 1 for i, m in enumerate(MONTHS)} | {"sept": 9}
NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "a couple": 2,
    "couple of": 2,
    "a few": 3,
    "few": 3,
}


@dataclass(frozen=True)
class ResolvedDate:
    text: str
    start: int
    end: int
    date: date
    granularity: Granularity

    def label(self) -> str:
        if self.granularity == "year":
            return f"{self.date.year}"
        if self.granularity == "month":
            return f"{self.date.year}-{self.date.month:02d}"
        if self.granularity == "week":
            return f"week of {self.date.isoformat()}"
        return self.date.isoformat()

    def as_dict(self) -> dict[str, str]:
        return {"text": self.text, "date": self.date.isoformat(), "granularity": self.granularity}

    def start_time(self) -> datetime:
        return datetime.combine(self.date, time(0), tzinfo=UTC)


def add_months(d: date, months: int) -> date:
    index = d.year * 12 + d.month - 1 + months
    year, month = divmod(index, 12)
    return date(year, month + 1, min(d.day, calendar.monthrange(year, month + 1)[1]))


def _shift(d: date, n: int, unit: str) -> tuple[date, Granularity]:
    unit = unit.rstrip("s")
    if unit == "day":
        return d + timedelta(days=n), "day"
    if unit == "week":
        return d + timedelta(weeks=n), "day"
    if unit == "month":
        return add_months(d, n), "day"
    return add_months(d, 12 * n), "day"


_NUM = (
    r"(\d{1,3}|a couple of|a couple|couple of|a few|few|an?"
    r"|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
)
_UNIT = r"(days?|weeks?|months?|years?)"
_WD = "|".join(WEEKDAYS)
_MON = (
    r"(january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
)

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("iso", re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")),
    ("month_day", re.compile(rf"\b{_MON}\s+(\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(\d{{4}}))?\b", re.I)),
    ("day_month", re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MON}(?:,?\s+(\d{{4}}))?\b", re.I)),
    ("month_year", re.compile(rf"\b{_MON}\s+(\d{{4}})\b", re.I)),
    # A month alone after a word that makes it one ("in March", "last October"); "may" and "march"
    # only capitalised ("this may not work").
    (
        "month",
        re.compile(
            r"\b(in|last|this|next|since|during|until|till|early|late|mid|mid-)\s*"
            r"(january|february|march|april|may|june|july|august|september|october|november|december)\b",
            re.I,
        ),
    ),
    ("day_before", re.compile(r"\bthe day before yesterday\b", re.I)),
    ("day_after", re.compile(r"\bthe day after tomorrow\b", re.I)),
    ("yesterday", re.compile(r"\byesterday\b", re.I)),
    ("today", re.compile(r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b", re.I)),
    ("tomorrow", re.compile(r"\btomorrow\b", re.I)),
    ("ago", re.compile(rf"\b{_NUM}\s+{_UNIT}\s+ago\b", re.I)),
    ("in", re.compile(rf"\bin\s+{_NUM}\s+{_UNIT}(?:'?\s*time)?\b", re.I)),
    ("weekend", re.compile(r"\b(last|this past|this|next|this coming)\s+weekend\b", re.I)),
    ("rel_weekday", re.compile(rf"\b(last|next|this|this coming|this past|coming|on)\s+({_WD})\b", re.I)),
    ("rel_period", re.compile(r"\b(last|next|this)\s+(week|month|year)\b", re.I)),
]


_FOR = re.compile(r"\bfor(?:\s+the)?\s*$", re.I)


def _weekday_before(d: date, wd: int) -> date:
    return d - timedelta(days=(d.weekday() - wd - 1) % 7 + 1)


def _weekday_after(d: date, wd: int) -> date:
    return d + timedelta(days=(wd - d.weekday() - 1) % 7 + 1)


def _month_number(name: str) -> int:
    name = name.lower().rstrip(".")
    return MONTHS.index(name) + 1 if name in MONTHS else _MONTH_ABBR[name[:4] if name == "sept" else name[:3]]


def _plan_or_nearest(candidates: list[date], today: date, tense: Tense, apart: Callable[[date], int]) -> date | None:
    """Which of ``candidates`` (ascending) a date without its year means: the first from ``today`` on
    when the statement looks ahead, the last up to ``today`` when it tells what happened, else the
    one nearest it by ``apart`` (the past one at a tie)."""
    if tense == "future":
        return next((d for d in candidates if d >= today), None)
    if tense == "past":
        return next((d for d in reversed(candidates) if d <= today), None)
    return min(candidates, key=lambda d: (apart(d), d > today), default=None)


def _day_of_year(month: int, day: int, today: date, tense: Tense) -> date | None:
    """A day named without its year ("on 12 January"): the next one in a plan, the last one in what
    happened, else the nearest (``_plan_or_nearest``). Said on 7 December, "my sister visits on 12
    January" is next month's, "I flew home on 20 December" last year's when said on 5 January;
    taking the year said in, both were eleven months off."""
    days = []
    for year in (today.year - 1, today.year, today.year + 1):
        try:
            days.append(date(year, month, day))
        except ValueError:  # 29 February outside a leap year
            continue
    return _plan_or_nearest(days, today, tense, lambda d: abs((d - today).days))


def _month_alone(word: str, month: int, today: date, tense: Tense) -> date:
    """A month named without its year: "last March" the latest before this month, "next March" the
    first after it, "this March" this year's; otherwise, as a day without its year, the next one
    (this month included) in a plan, the last one (this month included) in what happened, else the
    one nearest this month, counted in months: said in December, "we moved in March" is this
    year's, not the coming one."""
    this = today.replace(day=1)
    months = [date(year, month, 1) for year in (today.year - 1, today.year, today.year + 1)]
    if word == "last":
        return [m for m in months if m < this][-1]
    if word == "next":
        return next(m for m in months if m > this)
    if word == "this":
        return months[1]
    chosen = _plan_or_nearest(months, this, tense, lambda m: abs((m.year - this.year) * 12 + m.month - this.month))
    assert chosen is not None  # one of three consecutive years' is on or after this month
    return chosen


def _absolute(kind: str, m: re.Match[str], today: date, tense: Tense) -> tuple[date, Granularity] | None:
    try:
        if kind == "iso":
            return date(int(m[1]), int(m[2]), int(m[3])), "day"
        if kind in ("month_day", "day_month"):
            month, day, year = (m[1], m[2], m[3]) if kind == "month_day" else (m[2], m[1], m[3])
            if year:
                return date(int(year), _month_number(month), int(day)), "day"
            named = _day_of_year(_month_number(month), int(day), today, tense)
            return (named, "day") if named is not None else None
        if kind == "month_year":
            return date(int(m[2]), _month_number(m[1]), 1), "month"
        if kind == "month":
            if m[2].lower() in ("may", "march") and not m[2][0].isupper():
                return None  # "this may not work", "in march formation": words, not months
            return _month_alone(m[1].lower(), _month_number(m[2]), today, tense), "month"
    except ValueError:  # "February 30"
        return None
    return None


def _relative(kind: str, m: re.Match[str], today: date, tense: Tense) -> tuple[date, Granularity] | None:
    if kind == "day_before":
        return today - timedelta(days=2), "day"
    if kind == "day_after":
        return today + timedelta(days=2), "day"
    if kind == "yesterday":
        return today - timedelta(days=1), "day"
    if kind == "today":
        return today, "day"
    if kind == "tomorrow":
        return today + timedelta(days=1), "day"
    if kind in ("ago", "in"):
        n = int(m[1]) if m[1].isdigit() else NUMBERS[m[1].lower()]
        return _shift(today, -n if kind == "ago" else n, m[2].lower())
    if kind == "weekend":
        which = m[1].lower()
        if which in ("last", "this past"):
            return _weekday_before(today, 5), "day"
        if today.weekday() >= 5:  # said during a weekend: "this" is this one, "next" the one after
            saturday = today - timedelta(days=today.weekday() - 5)
            return (saturday + timedelta(weeks=1) if which == "next" else saturday), "day"
        return _weekday_after(today, 5), "day"
    if kind == "rel_weekday":
        which, wd = m[1].lower(), WEEKDAYS.index(m[2].lower())
        if which in ("last", "this past"):
            return _weekday_before(today, wd), "day"
        if which in ("next", "coming", "this coming"):
            return _weekday_after(today, wd), "day"
        if which == "this":
            return today + timedelta(days=wd - today.weekday()), "day"
        # "on Friday": the coming one when the statement looks ahead, else the last one.
        if today.weekday() == wd:
            return today, "day"
        return (_weekday_after(today, wd) if tense == "future" else _weekday_before(today, wd)), "day"
    if kind == "rel_period":
        step = {"last": -1, "this": 0, "next": 1}[m[1].lower()]
        unit = m[2].lower()
        if unit == "week":
            monday = today - timedelta(days=today.weekday())
            return monday + timedelta(weeks=step), "week"
        if unit == "month":
            return add_months(today.replace(day=1), step), "month"
        return date(today.year + step, 1, 1), "year"
    return None


def resolve_dates(text: str, said_at: datetime, *, tense: Tense = None) -> list[ResolvedDate]:
    """Every date expression in ``text``, in order of appearance, resolved against ``said_at``
    (its UTC day). ``tense`` tells whether the statement looks ahead ("future") or tells what
    happened ("past"), for bare "on Friday" and a day or month named without its year."""
    today = said_at.astimezone(UTC).date()
    taken: list[tuple[int, int]] = []
    found: list[ResolvedDate] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            if any(m.start() < end and start < m.end() for start, end in taken):
                continue
            # "I bought tickets for 12 March": the day something is for is a plan's, whatever
            # tense the statement is in.
            own = "future" if _FOR.search(text, 0, m.start()) else tense
            resolved = _absolute(kind, m, today, own) or _relative(kind, m, today, own)
            if resolved is None:
                continue
            taken.append((m.start(), m.end()))
            found.append(ResolvedDate(m[0], m.start(), m.end(), resolved[0], resolved[1]))
    return sorted(found, key=lambda r: r.start)


def annotate(text: str, dates: list[ResolvedDate]) -> str:
    """The text with each relative expression followed by its absolute date, so the stored memory
    still says when it happened once "yesterday" has lost its meaning."""
    out, last = [], 0
    for r in dates:
        out.append(text[last : r.end])
        if r.text.lower() != r.label().lower() and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", r.text):
            out.append(f" ({r.label()})")
        last = r.end
    out.append(text[last:])
    return "".join(out)
