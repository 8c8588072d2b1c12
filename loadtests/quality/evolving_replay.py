"""The subject's tests replayed on recorded hits (issue 30): recall@1 per kind with time cue, had
``timeline`` judged a subject's versions another way, offline, in seconds:

    HF_HUB_OFFLINE=1 PYTHONPATH=services .venv/bin/python loadtests/quality/evolving_record.py \
        --seed 30 --group 1 --out R30-1
    HF_HUB_OFFLINE=1 PYTHONPATH=services .venv/bin/python loadtests/quality/evolving_replay.py R30-1 [R31-0 ...]

Each recording's questions run through ``timeline.arrange`` with the hits it was given, under
each variant: a share test in front of the vector test (a version must score at least this share
of the best hit's fused score, the time channel's part taken off, as the timeline had until
session 24 at 0.5), the prototype's size (``PROTOTYPE``, the best hits whose mean the
versions are compared with) and how near the best hit a version must lie (``BESIDE_BEST``,
session 25; 0: no such test). The first row is the code as it is. Results in
docs/benchmarks-journal.md (session 24) and docs/benchmarks.md (session 25).
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from memvault.retrieval import timeline
from memvault.retrieval.hits import Hit

KINDS = ("newest", "oldest", "as-of", "in-period", "before/after")
BESIDE = timeline.BESIDE_BEST
VARIANTS = [
    (0.0, 3, BESIDE),
    (0.1, 3, BESIDE),
    (0.2, 3, BESIDE),
    (0.3, 3, BESIDE),
    (0.5, 3, BESIDE),
    (0.0, 2, BESIDE),
    (0.5, 2, BESIDE),
    (0.0, 3, 0.0),
    (0.0, 3, 0.4),
    (0.0, 3, 0.5),
]


def hits_of(rec: dict[str, Any]) -> list[Hit]:
    """The hits evolving_record.py recorded for one question, as ``timeline`` is given them."""
    return [
        Hit(
            memory=SimpleNamespace(  # type: ignore[arg-type]
                id=h["id"],
                content=h["content"],
                valid_from=h["valid_from"],
                created_at=h["created_at"],
                seq=h.get("seq", 0),
            ),
            score=h["score"],
            semantic_relevance=None,
            dense_rank=None,
            lexical_rank=None,
            lexical_score=None,
            channels=dict(h["channels"]),
        )
        for h in rec["hits"]
    ]


@contextmanager
def judged(share: float, prototype: int, beside: float, parts: dict[int, float]) -> Iterator[None]:
    """``timeline`` with a share test in front of its own, another prototype size and another
    nearness to the best hit, meanwhile."""
    near, size, best = timeline._near, timeline.PROTOTYPE, timeline.BESIDE_BEST

    def shared(query: str, hits: list[Hit], event: tuple[str, ...]) -> list[int]:
        def score(h: Hit) -> float:
            return h.score - parts.get(id(h), 0.0)

        return [i for i in near(query, hits, event) if i == 0 or score(hits[i]) >= share * score(hits[0])]

    timeline._near, timeline.PROTOTYPE, timeline.BESIDE_BEST = shared, prototype, beside  # type: ignore[assignment]
    try:
        yield
    finally:
        timeline._near, timeline.PROTOTYPE, timeline.BESIDE_BEST = near, size, best


def replay(records: list[dict[str, Any]], share: float, prototype: int, beside: float) -> dict[str, float]:
    right: dict[str, list[bool]] = {k: [] for k in KINDS}
    for r in records:
        if r["kind"] not in right:
            continue
        rec = r["arrange"]
        if rec is None:  # no time cue read: the recorded answer stands
            right[r["kind"]].append(bool(r["retrieved"]) and r["retrieved"][0] == r["expected"])
            continue
        hits = hits_of(rec)
        refs = {id(hit): h["ref"] for hit, h in zip(hits, rec["hits"], strict=True)}
        parts = {id(hit): h["time_part"] for hit, h in zip(hits, rec["hits"], strict=True)}
        part: Callable[[Hit], float] = lambda h, parts=parts: parts.get(id(h), 0.0)  # noqa: E731
        with judged(share, prototype, beside, parts):
            out = timeline.arrange(rec["query"], hits, rec["cues"], rec["vectors"], rec["limit"], part)
        right[r["kind"]].append(bool(out.hits) and refs[id(out.hits[0])] == r["expected"])
    return {k: sum(v) / len(v) for k, v in right.items() if v} | {
        "all": sum(sum(v) for v in right.values()) / max(1, sum(len(v) for v in right.values()))
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", type=Path, nargs="+", help="pickles written by evolving_record.py")
    args = parser.parse_args()
    for path in args.records:
        records = pickle.loads(path.read_bytes())
        print(f"\n{path.name}\n\n| share test | prototype | beside the best | " + " | ".join(KINDS) + " | all timed |")
        print("|---|---|---|" + "---|" * (len(KINDS) + 1))
        for share, prototype, beside in VARIANTS:
            got = replay(records, share, prototype, beside)
            cells = " | ".join(f"{got.get(k, 0.0):.3f}" for k in (*KINDS, "all"))
            print(f"| {share or 'none'} | {prototype} | {beside or 'none'} | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
