"""What a load test run prints: one table from locust's CSV (req/s, p50/p95/p99 and errors per
operation), and where the CPU went while it ran (API processes, PostgreSQL, job workers, locust,
and everything else on the machine, which on a shared machine is noise in the figures)."""

from __future__ import annotations

import contextlib
import csv
import json
import threading
from collections.abc import Callable
from pathlib import Path

import psutil


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


class CpuSampler(threading.Thread):
    """Samples, every ``interval_s``, the CPU of each role's process trees (in cores: 1.0 is one
    core busy) and of the whole machine; ``roles`` maps a role to a function giving its root pids,
    asked at every sample (processes come and go). A process counts for the first role claiming it."""

    def __init__(self, roles: dict[str, Callable[[], list[int]]], interval_s: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.roles = roles
        self.interval_s = interval_s
        self.samples: dict[str, list[float]] = {role: [] for role in [*roles, "machine"]}
        self._halt = threading.Event()
        self._procs: dict[int, psutil.Process] = {}

    def run(self) -> None:
        psutil.cpu_percent()
        while not self._halt.wait(self.interval_s):
            seen: set[int] = set()
            for role, pids in self.roles.items():
                total = 0.0
                for root in pids():
                    for p in _tree(root):
                        if p.pid in seen:
                            continue
                        seen.add(p.pid)
                        proc = self._procs.setdefault(p.pid, p)
                        with contextlib.suppress(psutil.Error):
                            total += proc.cpu_percent() / 100  # since this process's previous sample
                if self.samples[role] or pids():
                    self.samples[role].append(total)
            self.samples["machine"].append(psutil.cpu_percent() / 100 * (psutil.cpu_count() or 1))

    def stop(self) -> dict[str, float]:
        self._halt.set()
        self.join()
        # The first sample of a process measures nothing (cpu_percent needs two readings): skip it.
        # A role that never had a process here (the database of a remote deployment) is left out.
        means = {r: sum(s[1:]) / max(1, len(s) - 1) for r, s in self.samples.items() if s}
        means["other (not this test)"] = max(0.0, means["machine"] - sum(v for r, v in means.items() if r != "machine"))
        return means


def cpu_table(means: dict[str, float]) -> str:
    cores = psutil.cpu_count() or 1
    lines = [f"| CPU (mean over the run, {cores} cores) | cores busy | share of the machine |", "|---|---|---|"]
    for role, v in means.items():
        lines.append(f"| {role} | {v:.2f} | {100 * v / cores:.0f} % |")
    return "\n".join(lines)


def _num(row: dict[str, str], col: str) -> float:
    try:
        return float(row.get(col) or 0)
    except ValueError:
        return 0.0


def stats_table(stats_csv: Path) -> tuple[str, int]:
    """The summary table of locust's ``*_stats.csv`` and the total number of failures."""
    rows = list(csv.DictReader(stats_csv.open()))
    lines = ["| operation | requests | req/s | p50 ms | p95 ms | p99 ms | errors |", "|---|---|---|---|---|---|---|"]
    failures = 0
    for row in sorted(rows, key=lambda r: (r["Name"] == "Aggregated", r["Name"])):
        name = "**all**" if row["Name"] == "Aggregated" else row["Name"]
        fails = int(_num(row, "Failure Count"))
        if row["Name"] == "Aggregated":
            failures = fails
        lines.append(
            f"| {name} | {int(_num(row, 'Request Count'))} | {_num(row, 'Requests/s'):.1f} | "
            f"{_num(row, '50%'):.0f} | {_num(row, '95%'):.0f} | {_num(row, '99%'):.0f} | {fails} |"
        )
    return "\n".join(lines), failures


def failures_table(failures_csv: Path, limit: int = 10) -> str:
    """The first few distinct errors (locust's ``*_failures.csv``), so a failed run says why."""
    if not failures_csv.exists():
        return ""
    rows = list(csv.DictReader(failures_csv.open()))[:limit]
    return "\n".join(f"- {r['Name']}: {r['Error'][:200]} (x{r['Occurrences']})" for r in rows)


def stages_table(stages_json: Path) -> str:
    """The server's own search timings by stage (``metrics.timings_ms`` of the REST searches)."""
    if not stages_json.exists():
        return ""
    data = json.loads(stages_json.read_text())
    lines = ["| search stage (server) | n | p50 ms | p95 ms | p99 ms |", "|---|---|---|---|---|"]
    for stage, s in data.items():
        lines.append(f"| {stage} | {s['n']} | {s['p50']:.1f} | {s['p95']:.1f} | {s['p99']:.1f} |")
    return "\n".join(lines)
