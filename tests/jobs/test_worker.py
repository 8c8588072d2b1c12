"""A real `memvault worker` process on real Redis: it runs extraction jobs the API enqueued, and a
worker killed with SIGKILL mid-job leaves a job that the next worker completes exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from memvault.api import NamespaceAPI
from memvault.config import Settings
from memvault.extraction.base import EventText
from memvault.extraction.rules import RuleExtractor
from tests.conftest import Tenant
from tests.jobs.helpers import all_memories, new_id, wait_for_job
from tests.jobs.test_tasks import CONVERSATION, SAID_AT, events_body, ingest

NAMES = ["Ana", "Kenji", "Priya", "Tomas", "Lena", "Omar", "Sofia", "Yusuf", "Mei", "Jonas"]
CITIES = ["Lisbon", "Tokyo", "Nairobi", "Lima", "Oslo", "Hanoi", "Quito", "Porto", "Seoul", "Accra"]


def long_conversation(n: int = 500) -> list[tuple[str, str]]:
    return [
        ("user", f"I visited {CITIES[i % 10]} with my friend {NAMES[(i // 10) % 10]} on trip number {i}.")
        for i in range(n)
    ]


class Worker:
    """`memvault worker` as a child process in its own process group, its output in a file."""

    def __init__(self, settings: Settings, redis_url: str, log: Path, *, recover: bool) -> None:
        env = {
            **os.environ,
            "MEMVAULT_DATABASE_URL": settings.database_url or "",
            "MEMVAULT_REDIS_URL": redis_url,
            "MEMVAULT_JOB_RECOVER_ON_START": "true" if recover else "false",
            "MEMVAULT_LOG_LEVEL": "INFO",
            "HF_HUB_OFFLINE": "1",
        }
        self.log = log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "memvault.cli", "worker"],
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


@pytest.fixture
def workers(settings: Settings, redis_url: str, tmp_path: Path) -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for w in started:
        w.stop()


def start(workers: list[Worker], settings: Settings, redis_url: str, tmp_path: Path, *, recover: bool) -> Worker:
    w = Worker(settings, redis_url, tmp_path / "worker.log", recover=recover)
    workers.append(w)
    return w


async def expected_contents(messages: list[tuple[str, str]]) -> set[str]:
    """What the rule extractor makes of these messages: the library itself, run here."""
    said = datetime.fromisoformat(SAID_AT.replace("Z", "+00:00")).astimezone(UTC)
    events = [EventText(uuid.uuid4(), role, text, said, user_id="u1") for role, text in messages]
    return {c.content for c in await RuleExtractor().extract(events)}


class TestWorkerProcess:
    async def test_worker_extracts_what_the_api_enqueued(
        self,
        client: httpx.AsyncClient,
        api: NamespaceAPI,
        tenant_a: Tenant,
        settings: Settings,
        redis_url: str,
        tmp_path: Path,
        workers: list[Worker],
    ) -> None:
        start(workers, settings, redis_url, tmp_path, recover=False)
        out = await ingest(client, tenant_a, events_body("s-" + new_id()))
        job = await wait_for_job(client, tenant_a.headers, out["job_id"])

        assert job["status"] == "succeeded", (job, (tmp_path / "worker.log").read_text()[-3000:])
        mems = await all_memories(api, tenant_a.principal)
        assert {m.content for m in mems} == await expected_contents(CONVERSATION)
        assert {m.type.value for m in mems} == {"event", "preference", "instruction", "decision", "task", "fact"}

    async def test_sigkill_mid_job_then_restart_completes_exactly_once(
        self,
        client: httpx.AsyncClient,
        api: NamespaceAPI,
        tenant_a: Tenant,
        settings: Settings,
        redis_url: str,
        tmp_path: Path,
        workers: list[Worker],
    ) -> None:
        messages = long_conversation()
        first = start(workers, settings, redis_url, tmp_path, recover=False)
        out = await ingest(client, tenant_a, events_body("s-" + new_id(), messages))
        job_id = out["job_id"]

        # Wait until some chunks have committed, then kill the worker without warning.
        deadline = time.monotonic() + 120
        while True:
            body = (await client.get(f"/v1/jobs/{job_id}", headers=tenant_a.headers)).json()
            if body["status"] == "running" and (body["progress"] or 0) > 0:
                break
            assert body["status"] in ("queued", "running"), body
            assert time.monotonic() < deadline, ((tmp_path / "worker.log").read_text()[-3000:], body)
            await asyncio.sleep(0.02)
        first.kill()

        body = (await client.get(f"/v1/jobs/{job_id}", headers=tenant_a.headers)).json()
        partial = await all_memories(api, tenant_a.principal)
        assert body["status"] == "running" and body["attempts"] == 1
        expected = await expected_contents(messages)
        assert 0 < len(partial) < len(expected)

        start(workers, settings, redis_url, tmp_path, recover=True)
        job = await wait_for_job(client, tenant_a.headers, job_id)

        assert job["status"] == "succeeded", (job, (tmp_path / "worker.log").read_text()[-3000:])
        assert job["attempts"] == 2
        assert job["result"]["events_already_extracted"] > 0
        mems = await all_memories(api, tenant_a.principal)
        assert {m.content for m in mems} == expected
        assert len(mems) == len(expected)
        # Every event is cited by exactly one memory: none extracted twice, none lost.
        cited = Counter(e for m in mems for e in m.source_event_ids)
        assert set(map(str, cited)) == set(out["event_ids"]) and set(cited.values()) == {1}
