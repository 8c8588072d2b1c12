"""Throughput of `memvault serve --workers 1` vs `--workers 2` for searches, in one run.

Seeds one embedded data folder through the API, then for each worker count: starts the server,
runs a closed loop of C concurrent clients posting searches with queries never seen before for
D seconds (after a warm-up), and prints req/s, p50/p95/p99 and the answers by status."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
from stack import free_port  # the load test's own; this script runs from loadtests/ like it

MEMVAULT = Path(sys.executable).with_name("memvault")
WORDS = [
    "tea",
    "coffee",
    "paris",
    "lisbon",
    "meeting",
    "project",
    "deadline",
    "budget",
    "python",
    "rust",
    "garden",
    "music",
    "flight",
    "hotel",
    "doctor",
    "sister",
    "birthday",
    "invoice",
    "contract",
    "report",
    "design",
    "review",
    "launch",
    "marathon",
    "recipe",
]


def start(data: Path, workers: int, log: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env.update(HF_HUB_OFFLINE="1", MEMVAULT_LOG_LEVEL="WARNING", MEMVAULT_MAX_IN_FLIGHT="64")
    # Popen keeps its own copy of the file descriptor: the server writes on after the with.
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(MEMVAULT), "serve", "--workers", str(workers), "--port", str(port), "--data-dir", str(data)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        try:
            m = httpx.get(f"{base}/metrics", timeout=2)
            if m.status_code == 200 and f"memvault_http_requests_in_flight_limit {64.0 * workers}" in m.text:
                return proc, base, log.read_text()
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"server did not start:\n{log.read_text()[-3000:]}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)


async def seed(base: str, key: str, n: int) -> None:
    rnd = random.Random(1)
    async with httpx.AsyncClient(base_url=base, timeout=300, headers={"Authorization": f"Bearer {key}"}) as c:
        for start_at in range(0, n, 250):
            batch = [
                {"content": f"{' '.join(rnd.choices(WORDS, k=8))} note {i}", "user_id": f"u{i % 20}"}
                for i in range(start_at, min(n, start_at + 250))
            ]
            r = await c.post("/v1/namespaces/default/memories/batch", json={"memories": batch})
            r.raise_for_status()


async def load(base: str, key: str, users: int, seconds: float, warmup: float) -> dict[str, float]:
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    counter = 0
    rnd = random.Random(7)
    t0 = time.monotonic()
    measure_from, stop_at = t0 + warmup, t0 + warmup + seconds

    async def user() -> None:
        nonlocal counter
        # One client (one kept-alive connection) per user: the kernel hands each to a worker.
        async with httpx.AsyncClient(base_url=base, timeout=30, headers={"Authorization": f"Bearer {key}"}) as c:
            while time.monotonic() < stop_at:
                counter += 1
                q = f"{' '.join(rnd.choices(WORDS, k=3))} {counter}"
                began = time.monotonic()
                r = await c.post("/v1/namespaces/default/search", json={"query": q, "limit": 10})
                if began >= measure_from:
                    statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                    if r.status_code == 200:
                        latencies.append(time.monotonic() - began)
                if r.status_code == 503:
                    await asyncio.sleep(float(r.headers.get("retry-after", "1")))

    await asyncio.gather(*(user() for _ in range(users)))
    latencies.sort()

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000 if latencies else float("nan")

    return {"rps": len(latencies) / seconds, "p50": pct(0.5), "p95": pct(0.95), "p99": pct(0.99), "statuses": statuses}  # type: ignore[dict-item]


def main() -> None:
    users, seconds, memories = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    folder = Path(tempfile.mkdtemp(prefix="memvault-bench-workers-"))
    data = folder / "data"
    results = {}
    key = None
    for workers in [
        int(w) for w in (sys.argv[4] if len(sys.argv) > 4 else "1,2,1,2").split(",")
    ]:  # interleaved: the shared machine's load drifts between runs
        proc, base, printed = start(data, workers, folder / f"serve-{workers}.log")
        try:
            found = re.search(r"\n\s+(mv_[A-Za-z0-9]{40})\n", printed)
            if key is None:
                assert found, printed
                key = found.group(1)
                asyncio.run(seed(base, key, memories))
            tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
            pid = int((data / "pg" / "postmaster.pid").read_text().split()[0])
            pg = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
            me = psutil.Process()

            def cpu(procs: list[psutil.Process]) -> float:
                total = 0.0
                for p in procs:
                    with contextlib.suppress(psutil.NoSuchProcess):
                        total += sum(p.cpu_times()[:2])
                return total

            def waited(procs: list[psutil.Process]) -> float:
                # Seconds the processes' threads were runnable but waiting for a CPU (Linux schedstat).
                total = 0
                for p in procs:
                    for task in Path(f"/proc/{p.pid}/task").glob("*"):
                        with contextlib.suppress(OSError, IndexError, ValueError):
                            total += int((task / "schedstat").read_text().split()[1])
                return total / 1e9

            w0 = waited(tree)
            s0, p0, m0, wall0 = cpu(tree), cpu(pg), cpu([me]), time.monotonic()
            r = asyncio.run(load(base, key, users, seconds, warmup=5))
            wall = time.monotonic() - wall0
            # Backends started during the run are not in `pg`; list them again at the end.
            pg_end = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
            r["cores"] = (cpu(tree) - s0) / wall
            r["pg"] = (cpu(pg_end) - p0) / wall
            r["client"] = (cpu([me]) - m0) / wall
            r["load"] = os.getloadavg()[0]
            r["waited"] = (waited(tree) - w0) / wall
            print(
                f"workers={workers} users={users} {seconds:.0f}s: {r['rps']:.1f} req/s  p50 {r['p50']:.0f} ms  "
                f"p95 {r['p95']:.0f} ms  p99 {r['p99']:.0f} ms  statuses {r['statuses']}  "
                f"CPU cores used: server {r['cores']:.2f}, PostgreSQL {r['pg']:.2f}, load client {r['client']:.2f}; "
                f"server threads waiting for a CPU {r['waited']:.2f} (thread-seconds per second); "
                f"machine load average {r['load']:.1f}",
                flush=True,
            )
            results.setdefault(workers, []).append(r["rps"])
        finally:
            stop(proc)
    one, two = sum(results[1]) / len(results[1]), sum(results[2]) / len(results[2])
    print(f"mean: workers=1 {one:.1f} req/s, workers=2 {two:.1f} req/s, ratio {two / one:.2f}")


if __name__ == "__main__":
    main()
