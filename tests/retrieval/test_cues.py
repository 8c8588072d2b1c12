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


# Issue 30: the ways people ask for the newest or the oldest version of a fact, and the idioms that
# share their words without asking anything of time.
PHRASINGS: list[tuple[str, str | None]] = [
    ("where does Ana live now", "newest"),
    ("which city is Ana currently based in", "newest"),
    ("what is her current employer", "newest"),
    ("where does Ana live these days", "newest"),
    ("where is Ana living at the moment", "newest"),
    ("as things stand, where does Ana live", "newest"),
    ("as it stands, which company employs Ana", "newest"),
    ("where did Ana most recently move", "newest"),
    ("what was the most recent deploy tool", "newest"),
    ("which city does Ana live in nowadays", "newest"),
    ("what is Ana's latest city", "newest"),
    ("what is the newest database", "newest"),
    ("where is Ana based right now", "newest"),
    ("where does Ana live at present", "newest"),
    ("where has Ana ended up living", "newest"),
    ("does Ana still live in Lisbon", "newest"),
    ("what deployment pipeline is the team on as of now", "newest"),
    ("where is Ana based presently", "newest"),
    ("where did Ana originally live", "oldest"),
    ("where did Ana live at first", "oldest"),
    ("in the beginning, where was Ana based", "oldest"),
    ("which city did Ana use to live in", "oldest"),
    ("where did Ana used to work", "oldest"),
    ("where did Ana initially live", "oldest"),
    ("what was Ana's first city", "oldest"),
    ("which was the earliest database", "oldest"),
    ("where was Ana living back then", "oldest"),
    ("what did the team use before the change", "oldest"),
    ("where did Ana live before all the moves", "oldest"),
    ("what did the team start out with", "oldest"),
    ("where did Ana start her career", "oldest"),
    ("to begin with, which cloud did the project run on", "oldest"),
    ("what was the original hosting", "oldest"),
    # No time asked: the idioms that share the words.
    ("now that I think of it, where does Ana live", None),
    ("every now and then Ana goes hiking: where", None),
    ("what is Ana's first name", None),
    ("who won first place in the race", None),
    ("where is the first aid kit", None),
    ("at first glance, what does the report say", None),
    ("which bank holds Ana's current account", None),
    ("from now on, what should I call Ana", None),
    ("what is the still life painting called", None),
    ("where does Ana live", None),
    ("what did we decide about the database", None),
    ("what ingredient did Nate use to make the ice cream", None),
    ("what music has Calvin been creating lately", None),
    ("how many games has John won so far", None),
]


class TestPhrasings:
    @pytest.mark.parametrize(("query", "order"), PHRASINGS)
    def test_order_cue(self, query: str, order: str | None) -> None:
        cues = analyse(query, REF)
        assert cues.order == order
        assert cues.relative is None

    @pytest.mark.parametrize(
        ("query", "relative", "event"),
        [
            ("where did Ana live before moving to Lisbon", "before", ("mov", "lisbon")),
            ("after leaving Osaka, where did Ana go to live", "after", ("leav", "osaka")),
            ("what did the team deploy with before switching to ArgoCD", "before", ("switch", "argocd")),
            ("which database did they adopt after Cassandra", "after", ("cassandra",)),
            ("where did Ana work prior to joining Globex", "before", ("join", "globex")),
        ],
    )
    def test_before_and_after_an_event(self, query: str, relative: str, event: tuple[str, ...]) -> None:
        cues = analyse(query, REF)
        assert (cues.relative, cues.event, cues.order, cues.window) == (relative, event, None, None)
        assert cues.describe()["relative"] == relative

    @pytest.mark.parametrize(
        ("query", "window"),
        [
            ("where did Ana live before March 2021", (day(2021, 3, 1), day(2021, 4, 1))),
            ("where was Tim in the week before 16 November 2023", (day(2023, 11, 16), day(2023, 11, 17))),
            (
                "what was Calvin excited to do after getting his car fixed on 7 July, 2023",
                (day(2023, 7, 7), day(2023, 7, 8)),
            ),
        ],
    )
    def test_a_date_after_before_or_after_is_a_window(self, query: str, window: tuple[datetime, datetime]) -> None:
        # LoCoMo dates its events by the day they were told: the window finds them, as it did.
        cues = analyse(query, REF)
        assert (cues.relative, cues.window) == (None, window)

    @pytest.mark.parametrize(
        "query",
        [
            "what happened after all",
            "the day before, what did we eat",
            "what did Ana do after that",
            "before long",
            "which activity did Sam resume after a long time",
        ],
    )
    def test_no_event_no_relative_cue(self, query: str) -> None:
        cues = analyse(query, REF)
        assert cues.relative is None

    @pytest.mark.parametrize(
        ("query", "window"),
        [
            ("where did Ana live as of March 2021", (day(2021, 3, 1), day(2021, 4, 1))),
            ("where did Ana live as of 2021-03-04", (day(2021, 3, 4), day(2021, 3, 5))),
            ("which company employed Ana as of 4 March 2021", (day(2021, 3, 4), day(2021, 3, 5))),
            ("where did Ana live back in 2017", (day(2017, 1, 1), day(2018, 1, 1))),
            ("where did Ana live as of 2019", (day(2019, 1, 1), day(2020, 1, 1))),
        ],
    )
    def test_as_of_a_date_is_a_window(self, query: str, window: tuple[datetime, datetime]) -> None:
        assert analyse(query, REF).window == window

    @pytest.mark.parametrize(
        ("query", "day"),
        [
            # One day named as a date: what happened that day (retrieval/timeline.py).
            ("What did Gina find for her clothing store on 1 February, 2023?", True),
            ("Who did Maria have dinner with on May 3, 2023?", True),
            ("what did we ship on 2024-05-02", True),
            ("What did Joanna write yesterday?", True),
            # "As of" a day, "today": the state then.
            ("As of 1 September 2021, where was Ana living?", False),
            ("where did Ana live as of 2021-03-04", False),
            ("Which tool does the Falcon team deploy with today?", False),
            # Longer than a day, or no window: the subject's versions decide.
            ("Where did Ana live in 2019?", False),
            ("Where did Ana live in May 2018?", False),
            ("Where does Ana live now?", False),
        ],
    )
    def test_a_day_named_as_a_date_asks_what_happened(self, query: str, day: bool) -> None:
        cues = analyse(query, REF)
        assert cues.day is day
        assert ("day" in cues.describe()) is day
