"""A real `memvault worker` process on real Redis: it runs extraction jobs the API enqueued, and a
worker killed with SIGKILL mid-job leaves a job that the next worker completes exactly once."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from memvault.api import NamespaceAPI
from memvault.config import Settings
from memvault.extraction.base import EventText
from memvault.extraction.rules import RuleExtractor
from tests.conftest import Tenant
from tests.jobs.helpers import Worker, all_memories, new_id, start, wait_for_job
from tests.jobs.test_tasks import CONVERSATION, SAID_AT, events_body, ingest

NAMES = ["Ana", "Kenji", "Priya", "Tomas", "Lena", "Omar", "Sofia", "Yusuf", "Mei", "Jonas"]
CITIES = ["Lisbon", "Tokyo", "Nairobi", "Lima", "Oslo", "Hanoi", "Quito", "Porto", "Seoul", "Accra"]


def long_conversation(n: int = 500) -> list[tuple[str, str]]:
    return [
        ("user", f"I visited {CITIES[i % 10]} with my friend {NAMES[(i // 10) % 10]} on trip number {i}.")
        for i in range(n)
    ]


async def expected_contents(messages: list[tuple[str, str]]) -> set[str]:
    """What the rule extractor makes of these messages: the library itself, run here."""
    said = datetime.fromisoformat(SAID_AT.replace("Z", "+00:00")).astimezone(UTC)
    events = [EventText(uuid.uuid4(), role, text, said, user_id="u1") for role, text in messages]
    return {c.content for c in await RuleExtractor().extract(events)}


@pytest.mark.slow  # real `memvault worker` processes
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

        # The killed runner's lock on the job goes when PostgreSQL notices its connection closed,
        # which on a loaded machine can come after the new worker's start-up sweep: the periodic
        # sweep (every 15 s by default) takes the job then, as it would in production.
        start(workers, settings, redis_url, tmp_path, recover=True, env={"MEMVAULT_JOB_SWEEP_INTERVAL_S": "2"})
        job = await wait_for_job(client, tenant_a.headers, job_id, log=tmp_path / "worker.log")

        assert job["status"] == "succeeded", (job, (tmp_path / "worker.log").read_text()[-3000:])
        assert job["attempts"] == 2
        assert job["result"]["events_already_extracted"] > 0
        mems = await all_memories(api, tenant_a.principal)
        assert {m.content for m in mems} == expected
        assert len(mems) == len(expected)
        # Every event is cited by exactly one memory: none extracted twice, none lost.
        cited = Counter(e for m in mems for e in m.source_event_ids)
        assert set(map(str, cited)) == set(out["event_ids"]) and set(cited.values()) == {1}
