"""Periodic maintenance: a namespace's schedule (`settings.maintenance`, set with PATCH) gets its
organize job from the scheduler tick, once per run however many ticks or schedulers there are,
inside its own tenant. With Redis the tick comes from RQ's cron in a real `memvault scheduler`
process and a real `memvault worker` runs it; without, from a task in the server."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from rq import Queue
from rq.cron import get_cron_job_ids
from rq.job import Job as RQJob
from sqlalchemy import text

from memvault.api import NamespaceAPI
from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from memvault.maintenance.schemas import MaintenanceTick, ScheduledRun
from memvault.maintenance.service import schedule_slot
from memvault.memories.schemas import MemoryIn
from tests.conftest import Tenant, running
from tests.jobs.helpers import JOB_DEADLINE_S, Worker, all_memories, start, wait_for_job
from tests.maintenance.helpers import owner_sql

DUPLICATES = ["The user's cat is called Miso", "the user's cat is called  miso"]
TICK_JOB = "memvault.jobs.schedule.run_tick"


async def set_schedule(
    client: httpx.AsyncClient, t: Tenant, schedule: dict[str, Any] | None, ns: str = "default"
) -> None:
    r = await client.patch(f"/v1/namespaces/{ns}", json={"settings": {"maintenance": schedule}}, headers=t.headers)
    assert r.status_code == 200, r.text


def ours(tick: MaintenanceTick, t: Tenant) -> list[ScheduledRun]:
    # Other tests' tenants keep their schedules in this database, so a tick may queue theirs too.
    return [run for run in tick.queued if run.tenant_id == t.id]


async def organize_jobs(api: NamespaceAPI, t: Tenant) -> list[dict[str, Any]]:
    """Every organize job of the tenant, read as the owner (payload and key are not in the API)."""
    async with api._db.owner() as s:
        rows = await s.execute(
            text(
                "SELECT id, namespace_id, status, payload, job_key, created_by FROM jobs "
                "WHERE tenant_id = :t AND kind = 'organize' ORDER BY created_at"
            ),
            {"t": t.id},
        )
        return [dict(r._mapping) for r in rows]


async def store_duplicates(api: NamespaceAPI, t: Tenant) -> None:
    await api.store_many(t.principal, t.namespace, [MemoryIn(content=c) for c in DUPLICATES])


async def live_contents(api: NamespaceAPI, t: Tenant) -> list[str]:
    return sorted(m.content for m in await all_memories(api, t.principal) if m.superseded_at is None)


class TestTick:
    async def test_a_due_namespace_gets_one_job_per_run(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, redis_url: str
    ) -> None:
        await set_schedule(client, tenant_a, {"jobs": ["dedup", "promote"], "every_minutes": 60, "budget_ms": 5000})
        # A minute into a 60-minute slot, so that the times below fall in known slots.
        t0 = schedule_slot(datetime.now(UTC), 60) + timedelta(minutes=1)

        first = ours(await api.queue_due_maintenance(t0), tenant_a)

        assert len(first) == 1
        jobs = await organize_jobs(api, tenant_a)
        assert [j["id"] for j in jobs] == [first[0].job_id]
        job = jobs[0]
        assert job["payload"] == {
            "namespace": "default",
            "jobs": ["dedup", "promote"],
            "budget_ms": 5000,
            "schedule": (t0 - timedelta(minutes=1)).isoformat(),
        }
        assert job["created_by"] == "scheduler" and job["status"] == "queued"
        assert (await api.get_job(tenant_a.principal, job["id"])).namespace == "default"
        # Handed to RQ once, under the job's own id.
        conn = redis.Redis.from_url(redis_url)
        assert Queue("maintenance", connection=conn).job_ids.count(str(job["id"])) == 1

        # A retried tick, and ticks before the period has passed, queue nothing.
        assert ours(await api.queue_due_maintenance(t0), tenant_a) == []
        assert ours(await api.queue_due_maintenance(t0 + timedelta(minutes=58)), tenant_a) == []
        # Two schedulers ticking at once once it is due again: one run between them.
        both = await asyncio.gather(*(api.queue_due_maintenance(t0 + timedelta(minutes=60)) for _ in range(2)))
        assert sum(len(ours(tick, tenant_a)) for tick in both) == 1
        # Even should the namespace's last-run time be lost, the job key names the run: the same
        # slot makes no second job.
        await owner_sql(api, "UPDATE namespaces SET maintenance_run_at = NULL WHERE tenant_id = :t", t=tenant_a.id)
        assert ours(await api.queue_due_maintenance(t0 + timedelta(minutes=61)), tenant_a) == []

        jobs = await organize_jobs(api, tenant_a)
        assert len(jobs) == 2 and len({j["job_key"] for j in jobs}) == 2
        assert all(Queue("maintenance", connection=conn).job_ids.count(str(j["id"])) == 1 for j in jobs)
        conn.close()

    async def test_namespaces_of_one_tenant_on_the_same_schedule_each_get_their_run(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        r = await client.post("/v1/namespaces", json={"name": "second"}, headers=tenant_a.headers)
        assert r.status_code == 201, r.text
        for ns in ("default", "second"):
            await set_schedule(client, tenant_a, {"every_minutes": 60}, ns=ns)

        runs = ours(await api.queue_due_maintenance(), tenant_a)

        assert len(runs) == 2 and len({run.namespace_id for run in runs}) == 2
        names = {(await api.get_job(tenant_a.principal, run.job_id)).namespace for run in runs}
        assert names == {"default", "second"}

    async def test_namespaces_without_a_schedule_are_not_touched(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        r = await client.post("/v1/namespaces", json={"name": "cleared"}, headers=tenant_a.headers)
        assert r.status_code == 201, r.text
        await set_schedule(client, tenant_a, {"every_minutes": 5}, ns="cleared")
        await set_schedule(client, tenant_a, None, ns="cleared")

        tick = await api.queue_due_maintenance(datetime.now(UTC) + timedelta(days=30))

        assert ours(tick, tenant_a) == []
        assert await organize_jobs(api, tenant_a) == []
        async with api._db.owner() as s:
            runs = await s.scalars(
                text("SELECT maintenance_run_at FROM namespaces WHERE tenant_id = :t"), {"t": tenant_a.id}
            )
            assert list(runs) == [None, None]

    async def test_each_namespace_is_queued_and_run_in_its_own_tenant(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        for t in (tenant_a, tenant_b):
            await store_duplicates(api, t)
            await set_schedule(client, t, {"jobs": ["dedup"], "every_minutes": 30})

        tick = await api.queue_due_maintenance()

        (run_a,), (run_b,) = ours(tick, tenant_a), ours(tick, tenant_b)
        assert [j["id"] for j in await organize_jobs(api, tenant_a)] == [run_a.job_id]
        assert [j["id"] for j in await organize_jobs(api, tenant_b)] == [run_b.job_id]
        # Both namespaces are called "default"; each job is its own tenant's.
        assert run_a.namespace_id != run_b.namespace_id
        r = await client.get(f"/v1/jobs/{run_a.job_id}", headers=tenant_b.headers)
        assert r.status_code == 404 and r.json()["code"] == "job_not_found"
        for t, run in ((tenant_a, run_a), (tenant_b, run_b)):
            audit = await client.get("/v1/audit", params={"action": "namespace.organize"}, headers=t.headers)
            entries = audit.json()["data"]
            assert [(e["target_id"], e["actor"]) for e in entries] == [(str(run.job_id), "scheduler")]
            assert entries[0]["detail"]["jobs"] == ["dedup"]
        # A runner given another tenant's job finds nothing: the job exists only in its tenant.
        assert (await api.run_job(tenant_b.principal, run_a.job_id)).result == {"reason": "no such job"}

        for t, run in ((tenant_a, run_a), (tenant_b, run_b)):
            outcome = await api.run_job(t.principal, run.job_id)
            assert outcome.status == "succeeded" and outcome.result["dedup"]["merged_exact"] == 1
            assert len(await live_contents(api, t)) == 1  # merged


@pytest.mark.slow  # real `memvault scheduler` and `memvault worker` processes
class TestWithRedis:
    async def test_rq_cron_in_memvault_scheduler_runs_a_due_schedule_once(
        self,
        client: httpx.AsyncClient,
        api: NamespaceAPI,
        tenant_a: Tenant,
        tenant_b: Tenant,
        settings: Settings,
        redis_url: str,
        tmp_path: Path,
        workers: list[Worker],
    ) -> None:
        await store_duplicates(api, tenant_a)
        await store_duplicates(api, tenant_b)
        await set_schedule(client, tenant_a, {"jobs": ["dedup"], "every_minutes": 60})
        fast = {"MEMVAULT_SCHEDULER_INTERVAL_S": "1"}
        start(workers, settings, redis_url, tmp_path, recover=False, env=fast)
        start(workers, settings, redis_url, tmp_path, recover=False, command="scheduler", env=fast)
        logs = tmp_path / "worker.log", tmp_path / "scheduler.log"

        deadline = time.monotonic() + JOB_DEADLINE_S
        while not (jobs := await organize_jobs(api, tenant_a)):
            assert time.monotonic() < deadline, [p.read_text()[-3000:] for p in logs]
            await asyncio.sleep(0.2)
        job = await wait_for_job(client, tenant_a.headers, str(jobs[0]["id"]))

        assert job["status"] == "succeeded", (job, [p.read_text()[-3000:] for p in logs])
        assert job["result"]["dedup"]["merged_exact"] == 1
        assert len(await live_contents(api, tenant_a)) == 1  # merged

        # More ticks in the same period, each run by the worker, queue nothing more.
        conn = redis.Redis.from_url(redis_url)

        def finished_ticks() -> int:
            ids = get_cron_job_ids(TICK_JOB, conn)
            return sum(1 for i in ids if RQJob.fetch(i, connection=conn).get_status() == "finished")

        seen = finished_ticks()
        while finished_ticks() < seen + 2:
            assert time.monotonic() < deadline, [p.read_text()[-3000:] for p in logs]
            await asyncio.sleep(0.2)
        conn.close()
        assert len(await organize_jobs(api, tenant_a)) == 1
        # The namespace without a schedule was left alone.
        assert await organize_jobs(api, tenant_b) == []
        assert await live_contents(api, tenant_b) == sorted(DUPLICATES)


@pytest.mark.slow  # a `memvault serve` process
class TestInProcess:
    async def test_serve_without_redis_runs_schedules_itself(
        self,
        client: httpx.AsyncClient,
        api: NamespaceAPI,
        tenant_a: Tenant,
        settings: Settings,
        pg_urls: DatabaseUrls,
        embedder: LocalEmbedder,
    ) -> None:
        await store_duplicates(api, tenant_a)
        await set_schedule(client, tenant_a, {"jobs": ["dedup"], "every_minutes": 60})
        local = settings.model_copy(
            update={"redis_url": None, "job_recover_on_start": False, "scheduler_interval_s": 1}
        )

        async with running(create_app(local, urls=pg_urls, embedder=embedder)) as app:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test") as inproc:
                deadline = time.monotonic() + JOB_DEADLINE_S
                while not (jobs := await organize_jobs(api, tenant_a)):
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.1)
                job = await wait_for_job(inproc, tenant_a.headers, str(jobs[0]["id"]))

                assert job["status"] == "succeeded", job
                assert job["result"]["dedup"]["merged_exact"] == 1
                assert len(await live_contents(api, tenant_a)) == 1  # merged

                # A schedule set now is picked up by a later tick: the task keeps ticking...
                r = await client.post("/v1/namespaces", json={"name": "later"}, headers=tenant_a.headers)
                assert r.status_code == 201, r.text
                await set_schedule(client, tenant_a, {"jobs": ["promote"], "every_minutes": 60}, ns="later")
                while len(jobs := await organize_jobs(api, tenant_a)) < 2:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.1)
                later = await wait_for_job(inproc, tenant_a.headers, str(jobs[1]["id"]))
                assert later["status"] == "succeeded" and later["namespace"] == "later"
                # ...and those ticks queued nothing more for the first namespace in its period.
                ids = [j["id"] for j in await organize_jobs(api, tenant_a)]
                assert ids == [uuid.UUID(job["id"]), uuid.UUID(later["id"])]


@pytest.mark.slow  # runs the `memvault scheduler` command
class TestSchedulerCommand:
    def run(self, **env: str) -> subprocess.CompletedProcess[str]:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
        return subprocess.run(
            [sys.executable, "-m", "memvault.cli", "scheduler"],
            env={**clean, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )

    def test_without_redis_it_says_that_serve_does_it(self) -> None:
        done = self.run()
        assert done.returncode == 2
        assert "MEMVAULT_REDIS_URL" in done.stderr and "memvault serve" in done.stderr

    def test_interval_zero_means_nothing_to_schedule(self, redis_url: str) -> None:
        done = self.run(MEMVAULT_REDIS_URL=redis_url, MEMVAULT_SCHEDULER_INTERVAL_S="0")
        assert done.returncode == 2 and "MEMVAULT_SCHEDULER_INTERVAL_S=0" in done.stderr
