"""Every read of memories by vector distance knows the rows kept out of the HNSW graph (migration
0036): the index holds only rows ``WHERE in_graph``, so a nearest-row read that does not also
take the others exactly misses them, and one that does not name ``in_graph`` at all cannot use
the index and reads its slot exactly. Checked on the source: a module that measures a distance
between vectors names ``in_graph``, or says here why it need not."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "services" / "memvault"
DISTANCE = re.compile(r"<=>|cosine_distance\(")

# Modules that measure a distance without ordering memories by it, and why.
NOT_NEAREST_READS = {
    "traces/repository.py": "traces, a table and an HNSW index of their own",
    "retrieval/sql/hops.py": "the cosine of memories reached by their entity links, read by key",
    "retrieval/sql/signals.py": "the cosine of each candidate already found, read by key",
}


def offenders(package: Path) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package).as_posix()
        if name.startswith("db/migrations/versions/") or name in NOT_NEAREST_READS:
            continue  # a migration's SQL is its own revision's, redefined by later ones
        source = path.read_text()
        if DISTANCE.search(source) and "in_graph" not in source:
            found.append(name)
    return found


def test_every_nearest_read_of_memories_knows_the_rows_out_of_the_graph() -> None:
    assert offenders(PACKAGE) == []


def test_the_exempt_modules_still_measure_a_distance() -> None:
    stale = [name for name in NOT_NEAREST_READS if not DISTANCE.search((PACKAGE / name).read_text())]
    assert stale == [], "no longer measures a distance: remove it from NOT_NEAREST_READS"


def test_a_planted_nearest_read_is_found(tmp_path: Path) -> None:
    (tmp_path / "recall").mkdir()
    (tmp_path / "recall" / "repository.py").write_text('Q = "SELECT id FROM memories ORDER BY embedding <=> :v"\n')
    assert offenders(tmp_path) == ["recall/repository.py"]
