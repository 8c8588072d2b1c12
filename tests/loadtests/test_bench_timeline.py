"""loadtests/bench_timeline_subject.py measures what docs/benchmarks.md says it does: every one of
its hits names the subject, so each one's vector is compared with the prototype."""

from __future__ import annotations

import sys
from pathlib import Path

from memvault.retrieval.timeline import subject

LOADTESTS = Path(__file__).resolve().parents[2] / "loadtests"
if str(LOADTESTS) not in sys.path:
    sys.path.append(str(LOADTESTS))

import bench_timeline_subject as bench  # noqa: E402


def test_every_hit_of_the_benchmark_reaches_the_vector_comparison() -> None:
    hits, vectors = bench.hits_and_vectors(30)
    # One vector for all: each hit passes the comparison, so each was compared.
    alike = {memory_id: vectors[hits[0].memory.id] for memory_id in vectors}
    assert subject(bench.QUERY, hits, alike) == list(range(bench.HITS))
    # Their own (random) vectors: only the best hit is the subject's.
    assert subject(bench.QUERY, hits, vectors) == [0]
