"""The load test itself, briefly, so it cannot rot: loadtests/run.py seeds the embedded default
with two tenants, runs every locust scenario for 30 s with 10 users (each user first runs each of
its operations once), and must see no error, every operation in locust's CSV, and every process it
started gone afterwards."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]

OPERATIONS = {
    # RestAgent and MixedAgent
    *(f"REST {op}" for op in ("search", "context", "store", "batch10", "get", "list", "events")),
    # McpAgent (and MixedAgent's MCP search): a session, then the three tools
    *(f"MCP {op}" for op in ("initialize", "notifications/initialized", "tools/list")),
    *(f"MCP {tool}" for tool in ("memory_search", "memory_get_context", "memory_store")),
    # SdkAgent: the real SDK, timed per call
    *(f"SDK {op}" for op in ("search", "context", "store", "batch10", "get", "list", "events")),
    # IngestAgent: the custom metric and the requests behind it
    "INGEST events",
    "INGEST poll search",
    "INGEST events to searchable",
    # NoisyNeighbour and QuietTenant, measured apart
    "noisy REST batch50",
    "noisy REST search",
    *(f"quiet REST {op}" for op in ("search", "context", "store")),
}


def _ours(folder: Path) -> list[psutil.Process]:
    """Processes whose command line names ``folder`` (the server, its PostgreSQL)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if any(str(folder) in part for part in p.info["cmdline"] or ()):
            found.append(p)
    return found


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_every_scenario_runs_clean_and_stops_what_it_started(tmp_path: Path) -> None:
    out = tmp_path / "results"
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # the run's database folder lands in tmp_path
    run = subprocess.run(
        [
            sys.executable, str(ROOT / "loadtests" / "run.py"), "--scenario", "all", "--users", "10",
            "--time", "30", "--tour", "--tenants", "2", "--namespaces", "2", "--memories", "200", "--out", str(out),
        ],
        env=env, capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    report = run.stdout + run.stderr
    assert run.returncode == 0, report[-4000:]

    rows = {row["Name"]: row for row in csv.DictReader((out / "all-u10_stats.csv").open())}
    assert OPERATIONS - set(rows) == set(), run.stdout[-3000:]
    assert {name: row["Failure Count"] for name, row in rows.items() if row["Failure Count"] != "0"} == {}
    assert int(rows["INGEST events to searchable"]["Request Count"]) >= 1
    # The summary a person reads, and locust's own report beside the CSV.
    assert "| **all** |" in run.stdout and "| API processes |" in run.stdout and "| PostgreSQL |" in run.stdout
    assert (out / "all-u10.html").stat().st_size > 0
    # The plan holds API keys: readable by its owner only.
    assert (out / "plan.json").stat().st_mode & 0o077 == 0
    # Nothing the run started outlives it, and its database folder is gone.
    assert _ours(tmp_path) == []
    assert not list(tmp_path.glob("memvault-loadtest-*"))
