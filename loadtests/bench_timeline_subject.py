"""The Python a time-cue search spends finding the subject's versions among its hits
(``retrieval.timeline.subject``): 20 hits that all name the subject, so each one's vector is
compared with the prototype, 384 dimensions. A/B by code: run it from two checkouts.

    PYTHONPATH=services .venv/bin/python loadtests/bench_timeline_subject.py
    PYTHONPATH=<other checkout>/services .venv/bin/python loadtests/bench_timeline_subject.py

Prints the best of ``--repeat`` runs of ``--number`` calls, in microseconds per call."""

from __future__ import annotations

import argparse
import random
import sys
import timeit
import uuid

from memvault.memories.models import Memory
from memvault.retrieval.hits import Hit
from memvault.retrieval.timeline import subject

HITS = 20
DIMENSIONS = 384
QUERY = "Where does Ana Duarte live now?"


def hits_and_vectors(seed: int) -> tuple[list[Hit], dict[object, list[float]]]:
    rng = random.Random(seed)
    hits, vectors = [], {}
    for i in range(HITS):
        memory = Memory(id=uuid.uuid4(), content=f"Ana Duarte lives in city number {i}.")
        hits.append(Hit(memory, 1.0 - i * 0.02, None, i + 1, None, None))
        vectors[memory.id] = [rng.gauss(0.0, 1.0) for _ in range(DIMENSIONS)]
    return hits, vectors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    hits, vectors = hits_and_vectors(30)
    best = min(timeit.repeat(lambda: subject(QUERY, hits, vectors), number=args.number, repeat=args.repeat))
    print(f"subject(): {best / args.number * 1e6:.1f} µs per call ({HITS} hits, {DIMENSIONS} dimensions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
