"""The rule-based observer as a library: what a session was about, decided and left open."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from memvault.extraction.base import EventText
from memvault.observations.base import MAX_ITEMS, Notes
from memvault.observations.rules import RuleObserver

START = datetime(2024, 5, 8, 15, tzinfo=UTC)


def said(*lines: tuple[str, str]) -> list[EventText]:
    return [
        EventText(id=uuid.uuid4(), role=role, content=text, occurred_at=START + timedelta(minutes=i))
        for i, (role, text) in enumerate(lines)
    ]


async def test_decisions_open_questions_topics_and_summary() -> None:
    notes = await RuleObserver().observe(
        said(
            ("user", "I want to plan the billing service with Kenji."),
            ("user", "We decided to use PostgreSQL for the billing service."),
            ("assistant", "Good choice. Where will it run?"),
            ("user", "I'm not sure yet whether to host it in Frankfurt or Dublin."),
            ("assistant", "Either works."),
            ("user", "Thanks. Should we also add read replicas?"),
        ),
        None,
    )
    assert notes.decisions == ["We decided to use PostgreSQL for the billing service"]
    assert notes.open_questions == [
        "I'm not sure yet whether to host it in Frankfurt or Dublin.",
        "Should we also add read replicas?",
    ]
    assert "Kenji" in notes.topics and "PostgreSQL" in notes.topics
    assert notes.summary.startswith("6 messages between user, assistant (2024-05-08).")
    assert 'It opened with: "I want to plan the billing service with Kenji."' in notes.summary


async def test_an_answered_question_is_not_open() -> None:
    notes = await RuleObserver().observe(
        said(("user", "Which database should we use?"), ("assistant", "PostgreSQL.")), None
    )
    assert notes.open_questions == [] and notes.decisions == []


async def test_lists_are_bounded() -> None:
    notes = await RuleObserver().observe(
        said(*[("user", f"We decided to use tool number {i} for step {i}.") for i in range(20)]), None
    )
    assert len(notes.decisions) == MAX_ITEMS


async def test_no_messages_keeps_what_was_there() -> None:
    before = Notes(summary="earlier")
    assert await RuleObserver().observe([], before) is before
