"""SLOW (about a minute): `memvault serve --workers 2` as real processes. Both workers answer on
one port, one embedded PostgreSQL serves them, the first start's key is printed once, /metrics
sums both processes (and forgets a killed one's live gauges once it is restarted), and SIGTERM lets
a request in flight finish before everything stops."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.cli.test_cli import (
    ADMIN_KEY,
    MEMVAULT,
    ServeRun,
    assert_everything_stopped,
    clean_env,
    end_all,
    free_port,
    postmaster_pid,
    processes_using,
    stop,
)
from tests.gateway.test_slow_body import open_upload, parse

WORKERS = 2


def serve_workers(data_dir: Path, workdir: Path, metrics_dir: Path) -> ServeRun:
    port = free_port()
    out, err = workdir / "serve.out", workdir / "serve.err"
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen(
            [str(MEMVAULT), "serve", "--workers", str(WORKERS), "--port", str(port), "--data-dir", str(data_dir)],
            cwd=workdir,
            env=clean_env(HF_HUB_OFFLINE="1", MEMVAULT_LOG_FORMAT="json", PROMETHEUS_MULTIPROC_DIR=str(metrics_dir)),
            stdout=o,
            stderr=e,
            start_new_session=True,
        )
    run = ServeRun(proc, f"http://127.0.0.1:{port}", out, err)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"memvault serve exited with {proc.returncode} before answering\n{run.logs()}")
        try:
            # Ready when every worker is: the limit gauge counts the live ones.
            scraped = httpx.get(f"{run.base}/metrics", timeout=2)
            if scraped.status_code == 200 and in_flight_limit(scraped.text) == WORKERS * 32:
                return run
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    stop(run, signal.SIGKILL)
    pytest.fail(f"memvault serve --workers {WORKERS} did not start within 180 s\n{run.logs()}")


def in_flight_limit(text: str) -> float:
    for line in text.splitlines():
        if line.startswith("memvault_http_requests_in_flight_limit "):
            return float(line.split()[1])
    return 0.0


def postmasters(data_dir: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if "-D" in cmdline and str(data_dir) in " ".join(cmdline):
            found.append(proc)
    return found


def access_pids(run: ServeRun, route: str) -> set[int]:
    pids = set()
    for line in run.err.read_text().splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            if entry.get("logger") == "memvault.access" and entry.get("route") == route:
                pids.add(entry["pid"])
    return pids


@pytest.fixture
def folders() -> Iterator[tuple[Path, Path]]:
    # Outside tmp_path, as tests/cli/test_cli.py's data_dir explains.
    folder = Path(tempfile.mkdtemp(prefix="memvault-workers-test-"))
    yield folder / "memvault-data", folder / "metrics"
    end_all(processes_using(folder / "memvault-data"))
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.timeout(600)
class TestWorkers:
    def test_two_workers_share_the_port_one_database_and_drain_on_sigterm(
        self, folders: tuple[Path, Path], tmp_path: Path
    ) -> None:
        data_dir, metrics_dir = folders
        run = serve_workers(data_dir, tmp_path, metrics_dir)
        try:
            printed = run.out.read_text()
            assert printed.count("Admin API key") == 1, run.logs()
            key = ADMIN_KEY.search(printed)
            assert key is not None, run.logs()
            headers = {"Authorization": f"Bearer {key.group(1)}"}
            assert f"Workers    {WORKERS} processes" in printed
            # A log shipper reading the JSON lines reads nothing else: no warning, no progress bar.
            stray = [line for line in run.err.read_text().splitlines() if line and not line.startswith("{")]
            assert stray == [], stray

            assert len(postmasters(data_dir)) == 1, [p.info["cmdline"] for p in postmasters(data_dir)]

            # New connections land on whichever worker accepts first: ask until both have answered.
            stored = httpx.post(
                f"{run.base}/v1/namespaces/default/memories", json={"content": "Lin drinks oolong."}, headers=headers
            )
            assert stored.status_code == 201, stored.text
            deadline = time.monotonic() + 60
            while len(access_pids(run, "/v1/namespaces/{ns}/search")) < WORKERS and time.monotonic() < deadline:
                asyncio.run(concurrent_searches(run.base, headers, 8))
            pids = access_pids(run, "/v1/namespaces/{ns}/search")
            children = {p.pid for p in psutil.Process(run.proc.pid).children(recursive=True)}
            assert len(pids) == WORKERS, f"{pids}\n{run.logs()}"
            assert pids <= children and run.proc.pid not in pids
            # Both processes' samples in one scrape: requests counted by either are summed.
            scraped = httpx.get(f"{run.base}/metrics").text
            assert in_flight_limit(scraped) == WORKERS * 32

            # A worker killed outright is restarted; the scrape stops counting its live gauges
            # (they were summed in for good: a limit of three workers' worth, with two running).
            psutil.Process(min(pids)).kill()
            deadline = time.monotonic() + 120
            while not access_pids(run, "/v1/namespaces/{ns}/search") - pids and time.monotonic() < deadline:
                asyncio.run(concurrent_searches(run.base, headers, 8))  # until the new worker has answered
            limit = in_flight_limit(httpx.get(f"{run.base}/metrics").text)
            assert limit == WORKERS * 32, f"{limit}\n{run.logs()}"

            postmaster = postmaster_pid(data_dir)
            status = asyncio.run(request_during_sigterm(run, key.group(1)))
            assert status == 201, run.logs()
            assert run.proc.wait(timeout=90) == 0, run.logs()
            assert_everything_stopped(data_dir, postmaster, run)
            assert not any(psutil.pid_exists(pid) for pid in pids)
        finally:
            if run.proc.poll() is None:
                stop(run, signal.SIGKILL)


async def concurrent_searches(base: str, headers: dict[str, str], n: int) -> None:
    async def one(i: int) -> None:
        # A fresh connection each: one kept-alive connection would stay with one worker.
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            resp = await client.post("/v1/namespaces/default/search", json={"query": f"tea {i}"}, headers=headers)
            assert resp.status_code == 200, resp.text

    await asyncio.gather(*(one(i) for i in range(n)))


async def request_during_sigterm(run: ServeRun, key: str) -> int:
    """Start an upload, send SIGTERM while its body is still on the way, then finish it: the
    worker serving it must answer before it exits."""
    body = json.dumps({"content": "Stored while the server was stopping."}).encode()
    reader, writer = await open_upload(run.base, "/v1/namespaces/default/memories", key, len(body))
    writer.write(body[:10])
    await writer.drain()
    await asyncio.sleep(0.5)
    run.proc.send_signal(signal.SIGTERM)
    await asyncio.sleep(1.0)
    writer.write(body[10:])
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), timeout=30)
    writer.close()
    status, _, _ = parse(raw)
    return status
