"""The rule that keeps dedup from merging different facts that embed close together."""

from __future__ import annotations

import pytest

from memvault.maintenance.guard import why_distinct


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Ana prefers aisle seats", "Ana likes sitting in the aisle seat"),
        ("The user's cat is called Miso", "The user's cat is named Miso"),
        ("I prefer window seats on long flights", "i prefer window seats on long flights."),
        ("Ana is not vegetarian", "Ana isn't vegetarian"),
        ("Kenji lives in Lisbon", "Kenji now lives in Lisbon"),
    ],
)
def test_paraphrases_may_merge(a: str, b: str) -> None:
    assert why_distinct(a, b) is None


@pytest.mark.parametrize(
    ("a", "b", "reason"),
    [
        ("Ana's flight is on Monday", "Ana's flight is on Tuesday", "time"),
        ("Ana's flight is at 9am", "Ana's flight is at 10am", "numbers"),
        ("Ana's flight is on May 3", "Ana's flight is on May 4", "numbers"),
        ("The meeting moved to 2024-06-01", "The meeting moved to 2024-06-02", "numbers"),
        ("Ana likes olives", "Ana does not like olives", "negation"),
        ("Ana eats meat", "Ana doesn't eat meat", "negation"),
        ("Ana likes olives", "Ana hates olives", "aversion"),
        ("I call my mother every morning", "I call my mother every evening", "time"),
        ("We chose PostgreSQL for billing", "We chose MySQL for billing", "names"),
    ],
)
def test_distinct_facts_never_merge(a: str, b: str, reason: str) -> None:
    assert why_distinct(a, b) == reason
    assert why_distinct(b, a) == reason
