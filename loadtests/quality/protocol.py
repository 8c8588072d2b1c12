"""The LoCoMo protocol of issue 4, as plain functions: how a conversation becomes memories, which
questions are asked and with which evidence, and how an answer list is scored.

No database and no model here, so tests/loadtests/test_quality_scoring.py checks it on inline
fixtures. The dataset is read in place by the caller (CC BY-NC 4.0: never copied into the repo).
"""

from __future__ import annotations

import json
import random
import re
import statistics
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness import sessions

# The JSON's category numbers do not follow the order the paper lists them in; this is the
# mapping of the LoCoMo repo's evaluation code and the paper's Table 5 (see the dataset README in
# ../shared/datasets/locomo). Mem0's papers and tools label 1, 3 and 4 differently.
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
SESSION_DATE = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"
KS = (5, 10)

# "D1:3", and the malformed "D:11:26" and "D30:05"; "D1:3:5" or a bare "D" stay unusable.
_EVIDENCE_ID = re.compile(r"D:?(\d+):(\d+)")
_EVIDENCE_SEP = re.compile(r"[;,\s]+")


def parse_session_date(text: str) -> datetime:
    """LoCoMo's ``session_N_date_time`` as an aware datetime (the dataset gives no zone: UTC)."""
    cleaned = " ".join(text.split())
    return datetime.strptime(cleaned, SESSION_DATE).replace(tzinfo=UTC)


def normalise_evidence(raw: list[str], known: set[str]) -> tuple[list[str], list[str]]:
    """(usable dia_ids in order without repeats, tokens that match no turn). Entries may hold
    several ids separated by ``;``, ``,`` or spaces; ``D:11:26`` and ``D30:05`` are read as
    ``D11:26`` and ``D30:5``; an id must exist in ``known`` (the conversation's dia_ids)."""
    ids: list[str] = []
    unusable: list[str] = []
    for entry in raw:
        for token in _EVIDENCE_SEP.split(entry.strip()):
            if not token:
                continue
            m = _EVIDENCE_ID.fullmatch(token)
            dia_id = f"D{int(m[1])}:{int(m[2])}" if m else None
            if dia_id is None or dia_id not in known:
                unusable.append(token)
            elif dia_id not in ids:
                ids.append(dia_id)
    return ids, unusable


def content_of(turn: dict[str, Any]) -> str:
    """``Speaker: text``, plus the photo's caption when the turn shared one: it is part of what
    was said (questions ask about what was in the picture)."""
    text = f"{turn['speaker']}: {turn['text']}"
    caption = (turn.get("blip_caption") or "").strip()
    return f"{text} [shares a photo: {caption}]" if caption else text


def memories_of(conv: dict[str, Any]) -> list[dict[str, Any]]:
    """MemoryIn fields for every turn, in order. The caller adds ``entity_ids`` from
    ``metadata["speaker"]``. Namespace scope: the memories are asked about outside any session,
    and ``session_id`` still groups them (neighbours, filters)."""
    out = []
    for n, when, turns in sessions(conv):
        valid_from = parse_session_date(when)
        for t in turns:
            out.append(
                {
                    "content": content_of(t),
                    "type": "event",
                    "scope": "namespace",
                    "session_id": f"session_{n}",
                    "valid_from": valid_from,
                    "metadata": {"dia_id": t["dia_id"], "speaker": t["speaker"], "session_date": when},
                }
            )
    return out


def speakers_of(conv: dict[str, Any]) -> list[str]:
    c = conv["conversation"]
    named = [c[k] for k in ("speaker_a", "speaker_b") if c.get(k)]
    seen = [t["speaker"] for _, _, turns in sessions(conv) for t in turns]
    return list(dict.fromkeys(named + seen))


def reference_time(conv: dict[str, Any]) -> datetime:
    """The last session's date: "now" for the questions, so "last week" reads in the story's time."""
    return max(parse_session_date(when) for _, when, _ in sessions(conv))


@dataclass
class Question:
    namespace: str
    index: int  # position in the conversation's qa list
    category: int
    text: str
    evidence: list[str]
    unusable: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Kept:
    """latency.py's kept namespace (``--keep DIR``): what was built, the conversation it holds
    (its sample id names the namespace), its reference time, and every conversation's questions
    in a seeded order."""

    built: dict[str, Any]
    namespace: str
    reference: datetime
    questions: list[str]


def kept(keep: Path, data: Path, seed: int) -> Kept:
    built = json.loads((keep / "built.json").read_text())
    convs = json.loads(data.read_text())
    conv = next(c for c in convs if c["sample_id"] == built["conversation"])
    questions = [q.text for c in convs for q in questions_of(c)]
    random.Random(seed).shuffle(questions)
    return Kept(built=built, namespace=conv["sample_id"], reference=reference_time(conv), questions=questions)


def questions_of(conv: dict[str, Any]) -> list[Question]:
    """Categories 1-4 that list evidence (category 5 is adversarial: nothing to retrieve)."""
    known = {t["dia_id"] for _, _, turns in sessions(conv) for t in turns}
    out = []
    for i, q in enumerate(conv["qa"]):
        if q.get("category") not in CATEGORIES or not q.get("evidence"):
            continue
        ids, unusable = normalise_evidence(q["evidence"], known)
        out.append(Question(conv["sample_id"], i, q["category"], q["question"], ids, unusable))
    return out


# ---- scoring -------------------------------------------------------------------------------


def recall_at(evidence: list[str], retrieved: list[str | None], k: int) -> float:
    """Share of the evidence turns among the first k retrieved."""
    top = set(retrieved[:k])
    return sum(1 for e in evidence if e in top) / len(evidence)


def first_hit(evidence: list[str], retrieved: list[str | None], k: int = 10) -> int | None:
    """1-based rank of the first retrieved evidence turn within k, or None."""
    wanted = set(evidence)
    return next((i + 1 for i, d in enumerate(retrieved[:k]) if d in wanted), None)


def score(evidence: list[str], retrieved: list[str | None]) -> dict[str, float]:
    rank = first_hit(evidence, retrieved, 10)
    out = {f"recall@{k}": recall_at(evidence, retrieved, k) for k in KS}
    out["all@10"] = 1.0 if out["recall@10"] == 1.0 else 0.0
    out["any@10"] = 1.0 if rank is not None else 0.0
    out["mrr@10"] = 1 / rank if rank is not None else 0.0
    return out


METRICS = ("recall@5", "recall@10", "all@10", "any@10", "mrr@10")


def summarise(scored: list[tuple[int, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Means of every metric, over all questions and per category: {"all" | "1".. "4": {...}}."""
    groups: dict[str, list[dict[str, float]]] = {"all": [s for _, s in scored]}
    for cat in CATEGORIES:
        groups[str(cat)] = [s for c, s in scored if c == cat]
    return {
        name: {"n": len(rows), **{m: statistics.fmean(r[m] for r in rows) if rows else 0.0 for m in METRICS}}
        for name, rows in groups.items()
    }
