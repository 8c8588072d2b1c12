"""The processes a load test runs against, started and always stopped again by loadtests/run.py:
the embedded default (`memvault serve` with its own PostgreSQL), or the full stack (PostgreSQL,
Redis, `memvault serve` and M `memvault worker`s). Everything binds 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def memvault() -> list[str]:
    """The `memvault` beside this Python (a venv's), else the module run by this Python."""
    beside = Path(sys.executable).parent / "memvault"
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "memvault.cli"]


@dataclass
class Stack:
    """What run.py started: processes by role, and where the database and logs are."""

    out: Path
    data_dir: Path | None = None
    host: str = ""
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    procs: dict[str, list[subprocess.Popen[bytes]]] = field(default_factory=dict)
    logs: list[IO[bytes]] = field(default_factory=list)
    embedded_pg: Any = None  # the PostgresServer this process attached to (full stack, no database URL)

    def start(self, role: str, cmd: list[str]) -> subprocess.Popen[bytes]:
        log = (self.out / f"{role}-{len(self.procs.get(role, []))}.log").open("wb")
        self.logs.append(log)
        # A session of its own: stopping it stops its children too (uvicorn's workers, PostgreSQL's
        # pg_ctl), and Ctrl-C in the terminal reaches run.py alone, which stops things in order.
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        self.procs.setdefault(role, []).append(proc)
        return proc

    def pids(self, role: str) -> list[int]:
        return [p.pid for p in self.procs.get(role, [])]

    def postmaster_pid(self) -> int | None:
        pidfile = self.data_dir / "pg" / "postmaster.pid" if self.data_dir else None
        try:
            return int(pidfile.read_text().split()[0]) if pidfile else None
        except (OSError, ValueError, IndexError):
            return None

    def wait_ready(self, timeout_s: float = 600) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for role, procs in self.procs.items():
                for p in procs:
                    if p.poll() is not None:
                        raise SystemExit(f"{role} exited with {p.returncode}; see {self.out}/{role}-*.log")
            try:
                if httpx.get(f"{self.host}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise SystemExit(f"{self.host} not ready after {timeout_s:.0f} s")

    def stop(self) -> None:
        """SIGTERM to each process (the load first, then the API so requests drain, the database
        last), which stops its own children (`memvault serve` its workers and embedded PostgreSQL);
        SIGKILL to the whole group of one still running after 30 s; then SIGTERM to anything left
        in its group."""
        order = sorted(self.procs, key=lambda r: {"locust": 0, "api": 1, "worker": 2}.get(r, 3))
        for role in order:
            for p in self.procs[role]:
                if p.poll() is None:
                    p.terminate()
            for p in self.procs[role]:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    _signal_group(p, signal.SIGKILL)
                    p.wait(timeout=10)
                _signal_group(p, signal.SIGTERM)
        self.procs.clear()
        if self.embedded_pg is not None:
            self.embedded_pg.cleanup()
            self.embedded_pg = None
        for log in self.logs:
            log.close()


def _signal_group(p: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, sig)


def api_command(port: int, workers: int, data_dir: Path | None) -> list[str]:
    cmd = [*memvault(), "serve", "--port", str(port)]
    if data_dir is not None:
        cmd += ["--data-dir", str(data_dir)]
    # Always said: serve's own default is one process per core, and a run must say what it measured.
    cmd += ["--workers", str(workers)]
    return cmd


def embedded(stack: Stack, workers: int) -> None:
    """`memvault serve` on its embedded PostgreSQL; jobs run inside it (no Redis)."""
    assert stack.data_dir is not None
    port = free_port()
    stack.host = f"http://127.0.0.1:{port}"
    for name in ("MEMVAULT_DATABASE_URL", "MEMVAULT_REDIS_URL"):
        stack.env.pop(name, None)
    stack.start("api", api_command(port, workers, stack.data_dir))
    stack.wait_ready()


def full(stack: Stack, workers: int, job_workers: int, database_url: str | None, redis_url: str | None) -> None:
    """PostgreSQL (the given URL, else an embedded server this process runs as a plain PostgreSQL),
    Redis (the given URL, else a redis-server on a free port), N API processes, M job workers."""
    assert stack.data_dir is not None
    if not database_url:
        from memvault.db.embedded import server, settings

        stack.embedded_pg = server(stack.data_dir / "pg", settings("auto"), cleanup_mode="stop")
        database_url = stack.embedded_pg.get_uri()
    if not redis_url:
        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("the full stack needs --redis-url or redis-server on PATH")
        port = free_port()
        stack.start("redis", [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"])
        redis_url = f"redis://127.0.0.1:{port}/0"
    stack.env.update(MEMVAULT_DATABASE_URL=str(database_url), MEMVAULT_REDIS_URL=redis_url)
    port = free_port()
    stack.host = f"http://127.0.0.1:{port}"
    stack.start("api", api_command(port, workers, None))
    stack.wait_ready()  # serve has migrated the database before it answers
    for _ in range(job_workers):
        stack.start("worker", [*memvault(), "worker"])
