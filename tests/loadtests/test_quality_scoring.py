"""The LoCoMo quality benchmark's protocol (loadtests/quality/protocol.py): session dates, evidence
normalisation, recall and the per-category summary, on small inline fixtures (no dataset)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

# The benchmarks are scripts, not a package: import them the way they import each other.
LOADTESTS = Path(__file__).resolve().parents[2] / "loadtests"
for folder in (LOADTESTS, LOADTESTS / "quality"):
    if str(folder) not in sys.path:
        sys.path.append(str(folder))

from protocol import (  # noqa: E402
    content_of,
    first_hit,
    memories_of,
    normalise_evidence,
    parse_session_date,
    questions_of,
    recall_at,
    reference_time,
    score,
    speakers_of,
    summarise,
)

CONVERSATION = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bo!"},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "Look.", "blip_caption": "a photo of a dog on a beach"},
        ],
        "session_2_date_time": "12:09 am on 13 September, 2023",
        "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "I moved last week."}],
    },
    "qa": [
        {"question": "When did Ann move?", "evidence": ["D2:1"], "category": 2},
        {"question": "What did Bo show?", "evidence": ["D1:2; D2:01", "D7:7"], "category": 1},
        {"question": "Trick?", "evidence": ["D1:1"], "category": 5},
        {"question": "No evidence", "evidence": [], "category": 3},
        {"question": "Only bad evidence", "evidence": ["D"], "category": 4},
    ],
}


class TestSessionDate:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
            ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9, tzinfo=UTC)),
            ("12:30 pm on 1 January, 2024", datetime(2024, 1, 1, 12, 30, tzinfo=UTC)),
            ("  10:04 am on  19 December, 2023 ", datetime(2023, 12, 19, 10, 4, tzinfo=UTC)),
        ],
    )
    def test_parses_locomo_dates(self, text: str, expected: datetime) -> None:
        assert parse_session_date(text) == expected

    def test_refuses_other_text(self) -> None:
        with pytest.raises(ValueError):
            parse_session_date("8 May 2023")

    def test_reference_time_is_the_last_session(self) -> None:
        assert reference_time(CONVERSATION) == datetime(2023, 9, 13, 0, 9, tzinfo=UTC)


class TestEvidence:
    KNOWN = frozenset({"D1:3", "D8:6", "D9:17", "D11:26", "D30:5", "D4:4", "D4:6"})

    @pytest.mark.parametrize(
        ("raw", "ids", "unusable"),
        [
            (["D1:3"], ["D1:3"], []),
            (["D8:6; D9:17"], ["D8:6", "D9:17"], []),
            (["D9:1 D4:4 D4:6"], ["D4:4", "D4:6"], ["D9:1"]),
            (["D4:4,D4:6"], ["D4:4", "D4:6"], []),
            (["D:11:26"], ["D11:26"], []),
            (["D30:05"], ["D30:5"], []),
            (["D"], [], ["D"]),
            (["D1:3:5"], [], ["D1:3:5"]),
            (["D10:19"], [], ["D10:19"]),  # well formed, but no such turn
            (["D1:3", "D1:3", " D1:3 "], ["D1:3"], []),
        ],
    )
    def test_normalises(self, raw: list[str], ids: list[str], unusable: list[str]) -> None:
        assert normalise_evidence(raw, set(self.KNOWN)) == (ids, unusable)


class TestScoring:
    def test_recall_is_the_share_of_evidence_in_the_top_k(self) -> None:
        retrieved = ["D1:1", None, "D1:2", "D5:5", "D1:3", "D2:2"]
        assert recall_at(["D1:2", "D2:2"], retrieved, 5) == 0.5
        assert recall_at(["D1:2", "D2:2"], retrieved, 10) == 1.0
        assert recall_at(["D9:9"], retrieved, 10) == 0.0

    def test_first_hit_and_the_question_score(self) -> None:
        retrieved = ["D5:5", "D1:2", *(f"D3:{i}" for i in range(8)), "D2:2"]
        assert first_hit(["D2:2", "D1:2"], retrieved) == 2
        assert first_hit(["D2:2"], retrieved) is None  # rank 11
        s = score(["D1:2", "D2:2"], retrieved)
        assert s == {"recall@5": 0.5, "recall@10": 0.5, "all@10": 0.0, "any@10": 1.0, "mrr@10": 0.5}
        assert score(["D1:2"], retrieved)["all@10"] == 1.0

    def test_summary_per_category(self) -> None:
        hit = score(["a"], ["a"])
        miss = score(["a"], ["b"])
        out = summarise([(1, hit), (1, miss), (4, hit)])
        assert out["all"]["n"] == 3 and out["all"]["recall@10"] == pytest.approx(2 / 3)
        assert out["1"]["n"] == 2 and out["1"]["mrr@10"] == 0.5
        assert out["4"]["recall@5"] == 1.0
        assert out["2"] == {"n": 0, "recall@5": 0.0, "recall@10": 0.0, "all@10": 0.0, "any@10": 0.0, "mrr@10": 0.0}


class TestConversation:
    def test_turns_become_dated_memories_with_speaker_and_caption(self) -> None:
        mems = memories_of(CONVERSATION)
        assert [m["content"] for m in mems] == [
            "Ann: Hi Bo!",
            "Bo: Look. [shares a photo: a photo of a dog on a beach]",
            "Ann: I moved last week.",
        ]
        assert mems[2]["session_id"] == "session_2"
        assert mems[2]["valid_from"] == datetime(2023, 9, 13, 0, 9, tzinfo=UTC)
        assert mems[1]["metadata"] == {"dia_id": "D1:2", "speaker": "Bo", "session_date": "1:56 pm on 8 May, 2023"}
        assert speakers_of(CONVERSATION) == ["Ann", "Bo"]

    def test_caption_only_when_present(self) -> None:
        assert content_of({"speaker": "A", "text": "x", "blip_caption": "  "}) == "A: x"

    def test_questions_of_categories_1_to_4_with_evidence(self) -> None:
        qs = questions_of(CONVERSATION)
        assert [(q.index, q.category) for q in qs] == [(0, 2), (1, 1), (4, 4)]
        assert qs[1].evidence == ["D1:2", "D2:1"] and qs[1].unusable == ["D7:7"]
        assert qs[2].evidence == [] and qs[2].unusable == ["D"]
