"""The dashboard benchmark, briefly, so it cannot rot: loadtests/bench_dashboard.py seeds a small
tenant (sentences said again, so the reused-vector path runs too), times every dashboard page the
app has, and a second run reuses the seeded database and fails on a target no page can meet."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.dashboard.test_routes import ROUTES
from tests.loadtests.test_smoke import _ours

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "loadtests" / "bench_dashboard.py"


@pytest.fixture
def folder() -> Iterator[Path]:
    """Our own, not pytest's tmp_path: PostgreSQL runs as its own system user, which pytest's
    private /tmp/pytest-of-<user> locks out (tests/conftest.py's pg_uri says the same)."""
    made = Path(tempfile.mkdtemp(prefix="memvault-test-bench-dashboard-"))
    made.chmod(0o755)
    yield made
    shutil.rmtree(made, ignore_errors=True)


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(SCRIPT), "--data-dir", str(folder / "data"), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=840)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_page_is_timed_and_the_seed_is_kept(folder: Path) -> None:
    out = folder / "figures.json"
    first = _run(folder, "--memories", "800", "--sentences", "300", "--rounds", "3", "--json", str(out))
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]

    figures = json.loads(out.read_text())
    measured = {row["page"] for row in figures["pages"]}
    # Every GET page of the app (test_routes finds them the same way) and the sign-in form.
    expected = {path for method, path in ROUTES if method == "GET"} | {"/dashboard/signin"}
    assert expected <= measured, first.stdout
    for row in figures["pages"]:
        assert row["status"] == [200] and row["samples"] == 3 and row["p95_ms"] > 0, row
    assert figures["memories"] == 800 and "| `/dashboard` | 200 |" in first.stdout
    assert (folder / "data" / "seed.json").is_file()
    assert _ours(folder) == []  # its PostgreSQL stopped with it

    again = _run(folder, "--memories", "800", "--rounds", "1", "--warmup", "0", "--target-ms", "0.001")
    assert again.returncode == 1, (again.stdout + again.stderr)[-4000:]
    assert "reusing the tenant seeded in" in again.stderr
    assert "FAIL /dashboard: p95" in again.stdout
    assert _ours(folder) == []
