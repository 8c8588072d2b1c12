"""Reading intent and time cues from a query: the rules the fusion's intent and time channels use."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memvault.retrieval.cues import analyse

# A Wednesday.
REF = datetime(2024, 5, 15, 10, 30, tzinfo=UTC)


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


class TestIntent:
    @pytest.mark.parametrize(
        ("query", "intent"),
        [
            ("what does Ana like to drink", "preference"),
            ("what is her favourite colour", "preference"),
            ("what did we decide about the database", "decision"),
            ("which vendor was agreed", "decision"),
            ("what should I always do before deploying", "instruction"),
            ("what do I need to buy", "task"),
            ("remind me about the invoice", "task"),
            ("when did Caroline move to Lisbon", "event"),
            ("what date is the launch", "event"),
            ("tell me about the billing service", None),
        ],
    )
    def test_rules(self, query: str, intent: str | None) -> None:
        assert analyse(query, REF).intent == intent


class TestTimeCues:
    @pytest.mark.parametrize(
        ("query", "window"),
        [
            ("what happened in March 2023", (day(2023, 3, 1), day(2023, 4, 1))),
            ("notes from Dec 2022", (day(2022, 12, 1), day(2023, 1, 1))),
            ("what did we ship on 5 March 2023", (day(2023, 3, 5), day(2023, 3, 6))),
            ("the call on March 5th, 2023", (day(2023, 3, 5), day(2023, 3, 6))),
            ("what happened yesterday", (day(2024, 5, 14), day(2024, 5, 15))),
            ("what happened today", (day(2024, 5, 15), day(2024, 5, 16))),
            ("what did we do last week", (day(2024, 5, 6), day(2024, 5, 13))),
            ("what changed last month", (day(2024, 4, 1), day(2024, 5, 1))),
            ("what did we do last year", (day(2023, 1, 1), day(2024, 1, 1))),
            ("what happened 3 days ago", (day(2024, 5, 12), day(2024, 5, 13))),
            ("the trip in June", (day(2023, 6, 1), day(2023, 7, 1))),  # the latest June that has begun
            ("the trip in April", (day(2024, 4, 1), day(2024, 5, 1))),
            ("what did we launch in 2021", (day(2021, 1, 1), day(2022, 1, 1))),
        ],
    )
    def test_windows_relative_to_the_reference_time(self, query: str, window: tuple[datetime, datetime]) -> None:
        cues = analyse(query, REF)
        assert cues.window == window
        assert cues.order is None  # a named period wins over an ordering word

    @pytest.mark.parametrize(
        ("query", "order"),
        [
            ("what does Ana currently prefer", "newest"),
            ("what is the latest plan", "newest"),
            ("where does she live now", "newest"),
            ("what did she originally want", "oldest"),
            ("what was the first car he bought", "oldest"),
            ("what does Ana prefer", None),
        ],
    )
    def test_ordering_words(self, query: str, order: str | None) -> None:
        assert analyse(query, REF).order == order

    def test_no_such_day_is_no_window(self) -> None:
        assert analyse("on 31 February 2023", REF).window is None

    def test_may_the_verb_is_not_a_month(self) -> None:
        assert analyse("what may I eat", REF).window is None

    def test_describe_names_what_was_read(self) -> None:
        assert analyse("what did we decide in March 2023", REF).describe() == {
            "intent": "decision",
            "window": "2023-03-01T00:00:00+00:00/2023-04-01T00:00:00+00:00",
        }
