"""FAULTS: Redis restarted under load with a worker and the scheduler running, and a worker
SIGKILLed mid-job.

PostgreSQL is the outbox (docs/workers.md): every event the API acknowledged is extracted exactly
once, every job ends `succeeded` after one attempt (or, killed mid-job, one more), and nobody has
to start, restart or re-enqueue anything by hand."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from memvault.api import NamespaceAPI
from memvault.config import Settings
from tests.conftest import Tenant, make_tenant
from tests.faults.conftest import RedisServer
from tests.jobs.helpers import Worker, all_memories
from tests.jobs.test_tasks import events_body
from tests.jobs.test_worker import expected_contents, long_conversation

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]

# The sweep's period in these tests (15 s by default): what "within a minute" becomes here.
SWEEP = {"MEMVAULT_JOB_SWEEP_INTERVAL_S": "1"}
DEADLINE_S = 90


def trip(i: int) -> list[tuple[str, str]]:
    """One message whose memory no other message makes (no reinforcement across requests)."""
    return [("user", f"I flew to city number {i} with my colleague Ana on a rainy day.")]


async def wait_all(client: httpx.AsyncClient, tenant: Tenant, job_ids: list[str], logs: list[Path]) -> list[dict]:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        jobs = [(await client.get(f"/v1/jobs/{j}", headers=tenant.headers)).json() for j in job_ids]
        left = [j for j in jobs if j["status"] not in ("succeeded", "failed", "cancelled")]
        if not left:
            return jobs
        tails = "\n".join(p.read_text()[-3000:] for p in logs if p.exists())
        assert time.monotonic() < deadline, f"{len(left)} jobs never finished, e.g. {left[0]}\n{tails}"
        await asyncio.sleep(0.25)


async def assert_each_event_extracted_once(api: NamespaceAPI, tenant: Tenant, accepted: list[dict[str, Any]]) -> None:
    mems = await all_memories(api, tenant.principal)
    cited = Counter(str(e) for m in mems for e in m.source_event_ids)
    events = {e for out in accepted for e in out["event_ids"]}
    assert set(cited) == events, f"{len(events - set(cited))} acknowledged events never extracted"
    assert set(cited.values()) == {1}, "some event was extracted twice"


class TestRedisRestart:
    async def test_redis_restarted_mid_load_loses_no_job_and_worker_and_scheduler_carry_on(
        self,
        gateway: tuple[httpx.AsyncClient, NamespaceAPI],
        fault_settings: Settings,
        own_redis: RedisServer,
        tmp_path: Path,
        processes: list[Worker],
    ) -> None:
        client, api = gateway
        tenant = await make_tenant(api, "faults")
        log = tmp_path / "worker.log"
        worker = Worker(fault_settings, own_redis.url, log, recover=False, env=SWEEP)
        cron_log = tmp_path / "scheduler.log"
        cron = Worker(
            fault_settings,
            own_redis.url,
            cron_log,
            recover=False,
            command="scheduler",
            env={"MEMVAULT_SCHEDULER_INTERVAL_S": "1"},
        )
        processes.extend([worker, cron])
        accepted: list[dict[str, Any]] = []
        phase = {"name": "up"}
        by_phase: Counter[str] = Counter()
        stop = asyncio.Event()

        async def load() -> None:
            i = 0
            while not stop.is_set():
                body = events_body(f"s-{uuid.uuid4().hex[:8]}", trip(i))
                r = await client.post(f"/v1/namespaces/{tenant.namespace}/events", json=body, headers=tenant.headers)
                # Acknowledged whether or not Redis takes the job: PostgreSQL has it.
                assert r.status_code == 202, (phase, r.text)
                accepted.append(r.json())
                by_phase[phase["name"]] += 1
                i += 1
                await asyncio.sleep(0.05)

        task = asyncio.create_task(load())
        try:
            await asyncio.sleep(3)  # the worker loads its model meanwhile; jobs pile up on the queue
            own_redis.kill()  # every job waiting on the queue is gone with it
            phase["name"] = "down"
            # Longer than the worker's first wait (1 s) before it starts RQ's loop again: it must
            # survive finding Redis still down then, too.
            await asyncio.sleep(4)
            own_redis.start()
            phase["name"] = "back"
            await asyncio.sleep(2)
        finally:
            stop.set()
            await task
        assert by_phase["up"] and by_phase["down"] and by_phase["back"], by_phase

        jobs = await wait_all(client, tenant, [out["job_id"] for out in accepted], [log])

        assert worker.proc.poll() is None, f"the worker exited\n{log.read_text()[-3000:]}"
        assert cron.proc.poll() is None, f"the scheduler exited\n{cron_log.read_text()[-3000:]}"
        assert {j["status"] for j in jobs} == {"succeeded"}, [j for j in jobs if j["status"] != "succeeded"][:3]
        assert {j["attempts"] for j in jobs} == {1}, "some job was run twice"
        await assert_each_event_extracted_once(api, tenant, accepted)


class TestWorkerKilled:
    async def test_a_worker_sigkilled_mid_job_is_replaced_by_the_sweep_of_another(
        self,
        gateway: tuple[httpx.AsyncClient, NamespaceAPI],
        fault_settings: Settings,
        own_redis: RedisServer,
        tmp_path: Path,
        processes: list[Worker],
    ) -> None:
        client, api = gateway
        tenant = await make_tenant(api, "faults")
        # Two workers, neither recovering at start: only the periodic sweep can save the job.
        logs = [tmp_path / "one.log", tmp_path / "two.log"]
        workers = [Worker(fault_settings, own_redis.url, p, recover=False, env=SWEEP) for p in logs]
        processes.extend(workers)
        messages = long_conversation(300)  # 12 chunks: time to kill it between two
        r = await client.post(
            f"/v1/namespaces/{tenant.namespace}/events",
            json=events_body(f"s-{uuid.uuid4().hex[:8]}", messages),
            headers=tenant.headers,
        )
        assert r.status_code == 202, r.text
        out = r.json()
        job_id = out["job_id"]

        # Some chunks committed, then the worker running it dies without warning.
        deadline = time.monotonic() + DEADLINE_S
        while True:
            body = (await client.get(f"/v1/jobs/{job_id}", headers=tenant.headers)).json()
            if body["status"] == "running" and (body["progress"] or 0) > 0:
                break
            assert body["status"] in ("queued", "running"), body
            assert time.monotonic() < deadline, (body, [p.read_text()[-2000:] for p in logs])
            await asyncio.sleep(0.02)
        # The one that claimed it (a sweep may have handed it to both; the other one skipped it).
        claimed = f"job {job_id} (extraction) attempt 1 started"
        runner = next(w for w, p in zip(workers, logs, strict=True) if claimed in p.read_text())
        survivor = next(w for w in workers if w is not runner)
        runner.kill()
        killed_at = time.monotonic()
        partial = await all_memories(api, tenant.principal)
        expected = await expected_contents(messages)
        assert 0 < len(partial) < len(expected)

        [job] = await wait_all(client, tenant, [job_id], logs)

        assert job["status"] == "succeeded", job
        # The killed run and the one that finished it.
        assert job["attempts"] == 2, [p.read_text()[-3000:] for p in logs]
        assert job["result"]["events_already_extracted"] > 0
        assert time.monotonic() - killed_at < 60
        assert survivor.proc.poll() is None
        mems = await all_memories(api, tenant.principal)
        assert {m.content for m in mems} == expected and len(mems) == len(expected)
        await assert_each_event_extracted_once(api, tenant, [out])
