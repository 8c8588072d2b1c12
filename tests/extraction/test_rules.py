"""The rule-based extractor as a library: statements, types, dates and names."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime

import pytest

from memvault.extraction.base import EventText
from memvault.extraction.dates import Tense, annotate, resolve_dates
from memvault.extraction.rules import RuleExtractor, classify, find_entities, statements, tense

WEDNESDAY = datetime(2024, 5, 8, 15, 0, tzinfo=UTC)
SUNDAY = datetime(2024, 5, 12, 10, 0, tzinfo=UTC)


class TestDates:
    @pytest.mark.parametrize(
        ("text", "day", "granularity"),
        [
            ("yesterday", date(2024, 5, 7), "day"),
            ("the day before yesterday", date(2024, 5, 6), "day"),
            ("tomorrow", date(2024, 5, 9), "day"),
            ("tonight", date(2024, 5, 8), "day"),
            ("last Friday", date(2024, 5, 3), "day"),
            ("last Wednesday", date(2024, 5, 1), "day"),
            ("next Friday", date(2024, 5, 10), "day"),
            ("next month", date(2024, 6, 1), "month"),
            ("last month", date(2024, 4, 1), "month"),
            ("last week", date(2024, 4, 29), "week"),
            ("next year", date(2025, 1, 1), "year"),
            ("in two weeks", date(2024, 5, 22), "day"),
            ("in 3 days", date(2024, 5, 11), "day"),
            ("a couple of weeks ago", date(2024, 4, 24), "day"),
            ("two years ago", date(2022, 5, 8), "day"),
            ("this weekend", date(2024, 5, 11), "day"),
            ("on May 3rd 2023", date(2023, 5, 3), "day"),
            ("the 7th of June", date(2024, 6, 7), "day"),
            ("in March 2022", date(2022, 3, 1), "month"),
            ("on 2023-12-24", date(2023, 12, 24), "day"),
        ],
    )
    def test_resolved_against_the_time_said(self, text: str, day: date, granularity: str) -> None:
        (found,) = resolve_dates(f"It happens {text}.", WEDNESDAY)
        assert (found.date, found.granularity) == (day, granularity)

    def test_month_end_is_clamped(self) -> None:
        (found,) = resolve_dates("in one month", datetime(2024, 1, 31, tzinfo=UTC))
        assert found.date == date(2024, 2, 29)

    def test_bare_weekday_looks_ahead_only_for_plans(self) -> None:
        (past,) = resolve_dates("I saw her on Monday", WEDNESDAY)
        (plan,) = resolve_dates("I will see her on Monday", WEDNESDAY, tense="future")
        assert (past.date, plan.date) == (date(2024, 5, 6), date(2024, 5, 13))

    @pytest.mark.parametrize(
        ("text", "said", "tense", "day"),
        [
            # Said in December: a January day is next month's, not eleven months ago.
            ("My sister is visiting on 12 January", datetime(2026, 12, 7, tzinfo=UTC), None, date(2027, 1, 12)),
            # Said in January: a December day is last month's.
            ("I flew home on December 20th", datetime(2025, 1, 5, tzinfo=UTC), None, date(2024, 12, 20)),
            ("the 7th of June", WEDNESDAY, None, date(2024, 6, 7)),
            ("We met on 2 May", WEDNESDAY, None, date(2024, 5, 2)),
            # A plan names a day to come, even one that is nearer in the past.
            ("I will fly to Oslo on 3 March", WEDNESDAY, "future", date(2025, 3, 3)),
            ("I will call her on 8 May", WEDNESDAY, "future", date(2024, 5, 8)),
            ("Her birthday is on 29 February", WEDNESDAY, None, date(2024, 2, 29)),
        ],
    )
    def test_a_day_without_its_year_is_the_nearest_one(
        self, text: str, said: datetime, tense: Tense, day: date
    ) -> None:
        (found,) = resolve_dates(text, said, tense=tense)
        assert found.date == day

    @pytest.mark.parametrize(
        ("text", "tense", "month"),
        [
            ("We moved in March", None, date(2024, 3, 1)),
            ("In December I went home", None, date(2023, 12, 1)),
            ("last October we met", None, date(2023, 10, 1)),
            ("last May was hot", None, date(2023, 5, 1)),
            ("this March was cold", None, date(2024, 3, 1)),
            ("next March I start", None, date(2025, 3, 1)),
            ("I will travel in January", "future", date(2025, 1, 1)),
            ("I will travel in May", "future", date(2024, 5, 1)),
            ("I have run since February", None, date(2024, 2, 1)),
        ],
    )
    def test_a_month_alone(self, text: str, tense: Tense, month: date) -> None:
        (found,) = resolve_dates(text, WEDNESDAY, tense=tense)
        assert (found.date, found.granularity) == (month, "month")

    @pytest.mark.parametrize(
        ("text", "said", "day", "granularity"),
        [
            # Said in December: the March they moved is this year's, not the coming one.
            ("We moved in March", datetime(2026, 12, 7, tzinfo=UTC), date(2026, 3, 1), "month"),
            # Said in May: the June they married is last year's.
            ("In mid-June we married", datetime(2025, 5, 20, tzinfo=UTC), date(2024, 6, 1), "month"),
            ("I was in Lisbon on 20 November", datetime(2026, 1, 3, tzinfo=UTC), date(2025, 11, 20), "day"),
            ("We went to Kyoto on 2 February", datetime(2026, 12, 7, tzinfo=UTC), date(2026, 2, 2), "day"),
            # A plan's words win: the coming one.
            ("We moved the party, it will be in March", datetime(2026, 12, 7, tzinfo=UTC), date(2027, 3, 1), "month"),
            # What a past purchase is for is to come.
            ("I bought tickets for 12 March", datetime(2026, 12, 7, tzinfo=UTC), date(2027, 3, 12), "day"),
            ("We booked a table for the 2nd of January", datetime(2026, 12, 7, tzinfo=UTC), date(2027, 1, 2), "day"),
            # Neither: the nearest.
            ("My sister's birthday is on 12 January", datetime(2026, 12, 7, tzinfo=UTC), date(2027, 1, 12), "day"),
        ],
    )
    def test_what_happened_is_dated_before_it_was_said(
        self, text: str, said: datetime, day: date, granularity: str
    ) -> None:
        (found,) = resolve_dates(text, said, tense=tense(text))
        assert (found.date, found.granularity) == (day, granularity)

    @pytest.mark.parametrize("text", ["This may not work", "I may go in march formation", "They march in step"])
    def test_may_and_march_as_words(self, text: str) -> None:
        assert resolve_dates(text, WEDNESDAY) == []

    def test_weekend_said_on_a_weekend(self) -> None:
        (this,) = resolve_dates("this weekend", SUNDAY)
        (nxt,) = resolve_dates("next weekend", SUNDAY)
        assert (this.date, nxt.date) == (date(2024, 5, 11), date(2024, 5, 18))

    def test_uses_the_utc_day(self) -> None:
        late = datetime(2024, 5, 8, 23, 30, tzinfo=UTC)
        assert resolve_dates("yesterday", late)[0].date == date(2024, 5, 7)

    def test_words_that_are_not_dates(self) -> None:
        assert resolve_dates("I may go, but February 30 does not exist", WEDNESDAY) == []

    def test_annotation_keeps_the_words_and_adds_the_date(self) -> None:
        text = "Last Friday I met Kenji and next month I move"
        assert annotate(text, resolve_dates(text, WEDNESDAY)) == (
            "Last Friday (2024-05-03) I met Kenji and next month (2024-06) I move"
        )


class TestStatements:
    def test_sentences_and_clauses_with_their_own_subject(self) -> None:
        text = "Oh, I love sushi and I hate olives. We moved in March; my cat is called Miso!"
        assert statements(text) == ["I love sushi", "I hate olives.", "We moved in March", "My cat is called Miso!"]

    def test_a_conjunction_inside_one_clause_stays(self) -> None:
        assert statements("I like tea and biscuits.") == ["I like tea and biscuits."]

    @pytest.mark.parametrize(
        ("text", "kind"),
        [
            ("Please always answer in French", "instruction"),
            ("From now on, call me Sam", "instruction"),
            ("We decided to use PostgreSQL", "decision"),
            ("I'm going with the blue one", "decision"),
            ("I prefer window seats", "preference"),
            ("My favourite band is Low", "preference"),
            ("I'm a vegetarian", "preference"),
            ("I need to renew my passport", "task"),
            ("Remind me to call the bank", "task"),
            ("I went to Lisbon", "event"),
            ("I will fly to Oslo", "task"),
            ("My sister is a nurse", "fact"),
        ],
    )
    def test_classification(self, text: str, kind: str) -> None:
        assert classify(text, has_date=False) == kind

    @pytest.mark.parametrize("text", ["Thanks!", "Ok sure", "What time is it?", "Is that right?", "Sounds good to me"])
    def test_nothing_worth_remembering(self, text: str) -> None:
        assert classify(text, has_date=False) is None

    def test_a_dated_statement_is_an_event(self) -> None:
        assert classify("My exam is on Friday", has_date=True) == "event"

    @pytest.mark.parametrize("text", ["I'm Priya.", "I am Priya", "Im Priya", "My name's Priya", "i'm Priya"])
    def test_a_name_said_is_worth_remembering(self, text: str) -> None:
        # Two words, and "Hi, I'm Priya" loses its greeting first: dropped as too short to matter.
        assert classify(text, has_date=False) == "fact"

    @pytest.mark.parametrize("text", ["I'm fine", "I'm tired.", "I'm OK"])
    def test_how_someone_is_is_no_name(self, text: str) -> None:
        assert classify(text, has_date=False) is None


class TestEntities:
    def test_people_places_and_organisations(self) -> None:
        found = find_entities("My sister Ana moved to Lisbon and works at Acme Corp", "Caroline")
        assert found == [
            ("Caroline", "person"),
            ("Ana", "person"),
            ("Lisbon", "location"),
            ("Acme Corp", "organization"),
        ]

    def test_sentence_starts_days_and_months_are_not_names(self) -> None:
        assert find_entities("Yesterday I went out on Monday in May") == []


class TestRuleExtractor:
    async def test_only_user_and_participant_messages_are_mined(self) -> None:
        events = [
            EventText(uuid.uuid4(), "assistant", "I booked your flight to Oslo for next Friday.", WEDNESDAY),
            EventText(uuid.uuid4(), "system", "Always be concise.", WEDNESDAY),
            EventText(uuid.uuid4(), "user", "I prefer aisle seats.", WEDNESDAY, user_id="u1"),
        ]
        (c,) = await RuleExtractor().extract(events)
        assert (c.content, c.type, c.user_id, c.event_ids) == (
            "I prefer aisle seats",
            "preference",
            "u1",
            [events[2].id],
        )

    async def test_speaker_dates_and_provenance(self) -> None:
        e = EventText(uuid.uuid4(), "participant", "I ran a marathon yesterday.", WEDNESDAY, speaker="Caroline")
        (c,) = await RuleExtractor().extract([e])
        assert c.content == "Caroline: I ran a marathon yesterday (2024-05-07)"
        assert c.type == "event" and c.valid_from == datetime(2024, 5, 7, tzinfo=UTC)
        assert c.dates == [{"text": "yesterday", "date": "2024-05-07", "granularity": "day"}]
        assert ("Caroline", "person") in c.entities and c.event_ids == [e.id]

    async def test_a_user_who_says_their_name_has_it_remembered(self) -> None:
        e = EventText(uuid.uuid4(), "user", "Hi! I'm Priya. Hi, I'm Priya Nair.", WEDNESDAY, user_id="u1")
        assert [c.content for c in await RuleExtractor().extract([e])] == ["I'm Priya", "I'm Priya Nair"]

    async def test_what_happened_in_a_month_is_dated_before_it_was_said(self) -> None:
        # Said in December, "we moved in March" was dated the coming March (the nearest), a move
        # that had not happened yet; "in mid-June we married", said in May, the coming June.
        december = datetime(2026, 12, 7, tzinfo=UTC)
        may = datetime(2025, 5, 20, tzinfo=UTC)
        moved, married = await RuleExtractor().extract(
            [
                EventText(uuid.uuid4(), "user", "We moved to Porto in March.", december),
                EventText(uuid.uuid4(), "user", "In mid-June we married in Lisbon.", may),
            ]
        )
        assert moved.valid_from == datetime(2026, 3, 1, tzinfo=UTC)
        assert married.valid_from == datetime(2024, 6, 1, tzinfo=UTC)
