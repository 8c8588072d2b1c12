"""Shared by the job tests: waiting for a job to end, reading a namespace's memories, and
`memvault` worker and scheduler processes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from memvault.api import NamespaceAPI
from memvault.config import Settings
from memvault.memories.schemas import MemoryFilters, MemoryOut, MemoryState
from memvault.principal import Principal

# A guard against hanging, not a speed assertion.
JOB_DEADLINE_S = 120


def tail(log: Path, chars: int = 3000) -> str:
    return log.read_text()[-chars:]


async def wait_for_job(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    job_id: str,
    *,
    until: tuple[str, ...] = ("succeeded", "failed"),
    log: Path | None = None,
) -> dict[str, Any]:
    """The job once its status is one of ``until``; past the deadline, fails showing the job and
    the end of ``log`` (the worker's output), which says why it is still where it is."""
    deadline = time.monotonic() + JOB_DEADLINE_S
    while True:
        r = await client.get(f"/v1/jobs/{job_id}", headers=headers)
        assert r.status_code == 200, r.text
        body = r.json()
        if body["status"] in until:
            return body
        assert time.monotonic() < deadline, f"job still {body['status']}: {body}" + (
            f"\n{tail(log)}" if log is not None else ""
        )
        await asyncio.sleep(0.1)


async def all_memories(api: NamespaceAPI, p: Principal, ns: str = "default") -> list[MemoryOut]:
    """Every memory of the namespace, any state, current versions."""
    out: list[MemoryOut] = []
    cursor = None
    states = [MemoryState.tentative, MemoryState.stable, MemoryState.archived]
    while True:
        page = await api.list_memories(p, ns, MemoryFilters(state=states), limit=200, cursor=cursor)
        out += page.data
        cursor = page.next_cursor
        if cursor is None:
            return out


def new_id() -> str:
    return uuid.uuid4().hex[:8]


class Worker:
    """`memvault worker` (or another command, e.g. `scheduler`) as a child process in its own
    process group, its output in a file."""

    def __init__(
        self,
        settings: Settings,
        redis_url: str,
        log: Path,
        *,
        recover: bool,
        command: str = "worker",
        env: dict[str, str] | None = None,
        args: Sequence[str] = (),
    ) -> None:
        env = {
            **os.environ,
            "MEMVAULT_DATABASE_URL": settings.database_url or "",
            "MEMVAULT_REDIS_URL": redis_url,
            "MEMVAULT_JOB_RECOVER_ON_START": "true" if recover else "false",
            # Other tests leave jobs queued on purpose; a test that wants the sweep passes its interval.
            "MEMVAULT_JOB_SWEEP_INTERVAL_S": "0",
            # Nor their webhook deliveries; tests/webhooks/delivery/test_wiring.py passes an interval.
            "MEMVAULT_WEBHOOK_SWEEP_INTERVAL_S": "0",
            "MEMVAULT_LOG_LEVEL": "INFO",
            "HF_HUB_OFFLINE": "1",
            **(env or {}),
        }
        self.log = log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "memvault.cli", command, *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


def start(
    workers: list[Worker],
    settings: Settings,
    redis_url: str,
    tmp_path: Path,
    *,
    recover: bool,
    command: str = "worker",
    env: dict[str, str] | None = None,
    args: Sequence[str] = (),
) -> Worker:
    w = Worker(settings, redis_url, tmp_path / f"{command}.log", recover=recover, command=command, env=env, args=args)
    workers.append(w)
    return w
