"""FAULTS: the embedded PostgreSQL of a real `memvault serve` killed with SIGKILL mid-load.

While it is down every request answers 503 `database_unavailable` with `Retry-After` (never a
500) and liveness holds; the server restarts it by itself, the pool reconnects, no acknowledged
write is lost and every acknowledged job finishes once. A database that cannot be restarted makes
liveness fail, so the orchestrator restarts the process."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.cli.test_cli import (
    ADMIN_KEY,
    MEMVAULT,
    ServeRun,
    clean_env,
    end_all,
    postmaster_pid,
    processes_using,
    stop,
)
from tests.servers import free_port

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]

SERVE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "MEMVAULT_EMBEDDED_SUPERVISE_INTERVAL_S": "0.5",
    "MEMVAULT_EMBEDDED_RESTART_ATTEMPTS": "4",
    "MEMVAULT_JOB_SWEEP_INTERVAL_S": "1",
}


def serve(data_dir: Path, workdir: Path) -> ServeRun:
    port = free_port()
    out, err = workdir / "serve.out", workdir / "serve.err"
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen(
            [str(MEMVAULT), "serve", "--workers", "1", "--port", str(port), "--data-dir", str(data_dir)],
            cwd=workdir,
            env=clean_env(**SERVE_ENV),
            stdout=o,
            stderr=e,
            start_new_session=True,
        )
    run = ServeRun(proc, f"http://127.0.0.1:{port}", out, err)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"memvault serve exited with {proc.returncode}\n{run.logs()}"
        try:
            if httpx.get(f"{run.base}/readyz", timeout=2).status_code == 200:
                return run
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail(f"memvault serve did not become ready within 120 s\n{run.logs()}")


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Outside pytest's tmp_path, as tests/cli explains: PostgreSQL runs as its own system user.
    folder = Path(tempfile.mkdtemp(prefix="memvault-faults-pg-"))
    path = folder / "memvault-data"
    yield path
    end_all(processes_using(path))
    shutil.rmtree(folder, ignore_errors=True)


@dataclass
class Load:
    """Writes one memory after another, and now and then a batch of events, from a thread,
    recording every answer."""

    base: str
    headers: dict[str, str]
    stored: dict[str, str] = field(default_factory=dict)  # memory id -> content, acknowledged (201)
    jobs: list[str] = field(default_factory=list)  # acknowledged ingests' jobs (202)
    events: set[str] = field(default_factory=set)
    refusals: list[tuple[int, str | None, str | None]] = field(default_factory=list)  # status, code, Retry-After
    answered: Counter[int] = field(default_factory=Counter)
    failed: list[str] = field(default_factory=list)  # why the load stopped: no answer, a body not JSON
    stopping: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        try:
            self._run()
        except Exception as exc:
            self.failed.append(repr(exc))

    def _run(self) -> None:
        with httpx.Client(base_url=self.base, headers=self.headers, timeout=30) as c:
            i = 0
            while not self.stopping.is_set():
                content = f"Fault check number {i}: Ana keeps her spare key under the blue flowerpot {i}."
                if i % 5 == 4:
                    body = {"messages": [{"role": "user", "content": f"I moved to flat number {i} in Lisbon."}]}
                    r = c.post("/v1/namespaces/default/events", json={"session_id": f"s{i}", **body})
                else:
                    r = c.post("/v1/namespaces/default/memories", json={"content": content, "type": "fact"})
                self.answered[r.status_code] += 1
                if r.status_code == 201:
                    self.stored[r.json()["id"]] = content
                elif r.status_code == 202:
                    self.jobs.append(r.json()["job_id"])
                    self.events.update(r.json()["event_ids"])
                else:
                    code = r.json().get("code") if r.headers.get("content-type", "").endswith("json") else None
                    self.refusals.append((r.status_code, code, r.headers.get("retry-after")))
                    time.sleep(0.1)
                i += 1


def wait_for(what: str, check: object, run: ServeRun, timeout: float = 60, load: Load | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if load is not None:
            assert not load.failed, (load.failed, run.logs())
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s\n{run.logs()}"
        time.sleep(0.1)


def current_postmaster(data_dir: Path) -> int | None:
    """The postmaster's pid, or None while PostgreSQL replaces a dead one's postmaster.pid."""
    try:
        return postmaster_pid(data_dir)
    except (FileNotFoundError, ValueError, IndexError):
        return None


def status_of(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=5).status_code
    except httpx.TransportError:
        return None


class TestEmbeddedPostgresKilled:
    def test_503_while_down_then_it_restarts_and_nothing_acknowledged_is_lost(
        self, data_dir: Path, tmp_path: Path
    ) -> None:
        run = serve(data_dir, tmp_path)
        try:
            match = ADMIN_KEY.search(run.out.read_text())
            assert match, run.logs()
            headers = {"Authorization": f"Bearer {match.group(1)}"}
            load = Load(run.base, headers)
            thread = threading.Thread(target=load.run, daemon=True)
            thread.start()
            wait_for("a few writes", lambda: len(load.stored) >= 10 and load.jobs, run, load=load)

            killed = postmaster_pid(data_dir)
            os.kill(killed, signal.SIGKILL)
            wait_for("a refusal", lambda: load.refusals, run, load=load)
            # Down, or coming back: the process itself is alive and answers.
            assert status_of(f"{run.base}/healthz") == 200
            before = len(load.stored)
            wait_for(
                "recovery",
                lambda: current_postmaster(data_dir) not in (None, killed) and len(load.stored) >= before + 10,
                run,
                load=load,
            )
            load.stopping.set()
            thread.join(60)
            assert not load.failed, load.failed

            assert 500 not in load.answered, (load.answered, run.logs())
            assert {status for status, _, _ in load.refusals} == {503}, load.refusals
            assert {(code, retry) for _, code, retry in load.refusals} == {("database_unavailable", "5")}
            assert status_of(f"{run.base}/readyz") == 200
            assert status_of(f"{run.base}/healthz") == 200

            with httpx.Client(base_url=run.base, headers=headers, timeout=30) as c:
                # Every acknowledged write is there.
                for memory_id, content in load.stored.items():
                    r = c.get(f"/v1/namespaces/default/memories/{memory_id}")
                    assert r.status_code == 200 and r.json()["content"] == content, r.text
                # Every acknowledged job finishes, once, and extracts each event once.
                deadline = time.monotonic() + 90
                while True:
                    jobs = [c.get(f"/v1/jobs/{j}").json() for j in load.jobs]
                    if all(j["status"] == "succeeded" for j in jobs):
                        break
                    assert time.monotonic() < deadline, ([j for j in jobs if j["status"] != "succeeded"], run.logs())
                    time.sleep(0.5)
                cited: Counter[str] = Counter()
                cursor = None
                while True:
                    params = {"limit": 200, **({"cursor": cursor} if cursor else {})}
                    page = c.get("/v1/namespaces/default/memories", params=params).json()
                    cited.update(e for m in page["data"] for e in m["source_event_ids"])
                    cursor = page.get("next_cursor")
                    if not cursor:
                        break
                assert set(cited) == load.events and set(cited.values()) == {1}

            # Now a database that cannot come back: liveness fails, so that the process is restarted.
            version = data_dir / "pg" / "PG_VERSION"
            shutil.move(version, tmp_path / "PG_VERSION")
            os.kill(postmaster_pid(data_dir), signal.SIGKILL)
            try:
                wait_for("liveness failing", lambda: status_of(f"{run.base}/healthz") == 503, run)
                body = httpx.get(f"{run.base}/healthz", timeout=5).json()
                assert body["code"] == "not_live", body
                # Both doors still say what is wrong and when to come back.
                r = httpx.post(f"{run.base}/v1/namespaces/default/memories", json={"content": "x"}, headers=headers)
                assert (r.status_code, r.json()["code"], r.headers.get("retry-after")) == (
                    503,
                    "database_unavailable",
                    "5",
                ), r.text
                mcp = {**headers, "Accept": "application/json, text/event-stream"}
                r = httpx.post(f"{run.base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=mcp)
                assert (r.status_code, r.json()["code"], r.headers.get("retry-after")) == (
                    503,
                    "database_unavailable",
                    "5",
                ), r.text
                # Not a credential problem: no challenge that would send a client to sign in again.
                assert "www-authenticate" not in r.headers
            finally:
                shutil.move(tmp_path / "PG_VERSION", version)
        finally:
            if run.proc.poll() is None:
                stop(run, signal.SIGTERM)
