"""The dashboard benchmark: which pages it finds and what it opens them with (on a small app of
made-up routes, as the pages being built may look), and, briefly, the benchmark itself so it cannot
rot: loadtests/bench_dashboard.py seeds a small tenant (sentences said again, so the reused-vector
path runs too), times every dashboard page the app has, and a second run reuses the seeded
database and fails on a target no page can meet."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI

from tests.dashboard.test_routes import ROUTES
from tests.loadtests.test_smoke import _ours

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "loadtests" / "bench_dashboard.py"
# The benchmarks are scripts, not a package: import them the way they import each other.
if str(ROOT / "loadtests") not in sys.path:
    sys.path.append(str(ROOT / "loadtests"))

from bench_dashboard import pages_of  # noqa: E402
from dashboard_seed import Seeded  # noqa: E402

SEEDED = Seeded(
    tenant="acme", tenant_id="t-1", namespace="assistant", email="o@example.com", password="pw", memories=10,
    memory_id="m-1", job_id="j-1", key_id="k-1", member_id="u-1", invitation_id="i-1", entity_id="e-1",
    grant_id="g-1", session_id="s-1", user_id="user-1", seconds=1.0, embed_texts_per_s=1.0,
)  # fmt: skip


def _app(*paths: str, post: str = "/dashboard/keys") -> FastAPI:
    app = FastAPI()
    for path in paths:
        app.get(path)(_plain)
    app.post(post)(_plain)
    app.get("/v1/account")(_plain)
    return app


async def _page(q: str | None = None) -> None:
    return None


async def _plain() -> None:
    return None


class TestWhichPagesAndWithWhat:
    def test_every_get_under_dashboard_with_its_ids_filled(self) -> None:
        app = _app(
            "/dashboard/namespaces/{name}",
            "/dashboard/explorer/{ns}/memories/{memory_id}",
            "/dashboard/jobs/{job_id}",
            "/dashboard/keys/{key_id}",
            "/dashboard/members/{user_id}",
            "/dashboard/apps/{grant_id}",
        )
        app.get("/dashboard")(_plain)
        app.get("/dashboard/signin")(_plain)
        pages = {p.label: p for p in pages_of(app, SEEDED)}
        assert {label: p.path for label, p in pages.items()} == {
            "/dashboard": "/dashboard",
            "/dashboard/signin": "/dashboard/signin",
            "/dashboard/namespaces/{name}": "/dashboard/namespaces/assistant",
            "/dashboard/explorer/{ns}/memories/{memory_id}": "/dashboard/explorer/assistant/memories/m-1",
            "/dashboard/jobs/{job_id}": "/dashboard/jobs/j-1",
            "/dashboard/keys/{key_id}": "/dashboard/keys/k-1",
            "/dashboard/members/{user_id}": "/dashboard/members/u-1",
            "/dashboard/apps/{grant_id}": "/dashboard/apps/g-1",
        }
        assert pages["/dashboard/signin"].anonymous and not pages["/dashboard"].anonymous

    def test_a_search_box_is_measured_browsing_and_searching(self) -> None:
        app = FastAPI()
        app.get("/dashboard/explorer")(_plain)  # reads its query itself: known by its name
        app.get("/dashboard/audit")(_page)  # declares q
        pages = {p.label: p for p in pages_of(app, SEEDED)}
        assert set(pages) == {
            "/dashboard/explorer",
            "/dashboard/explorer?q=…",
            "/dashboard/audit",
            "/dashboard/audit?q=…",
        }
        assert pages["/dashboard/explorer?q=…"].searches and not pages["/dashboard/explorer"].searches
        assert pages["/dashboard/explorer"].params["namespace"] == "assistant"

    def test_a_parameter_it_cannot_fill_stops_the_run_by_name(self) -> None:
        with pytest.raises(SystemExit, match=r"\{widget_id\}"):
            pages_of(_app("/dashboard/widgets/{widget_id}"), SEEDED)


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
    # What the script does is tested here, not how fast the pages are (that is the benchmark's
    # figure, on a quiet machine): a target no loaded CI machine can miss.
    first = _run(
        folder, "--memories", "800", "--sentences", "300", "--rounds", "3", "--target-ms", "60000", "--json", str(out)
    )
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
