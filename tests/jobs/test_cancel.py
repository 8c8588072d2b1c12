"""POST /v1/jobs/{id}/cancel: a queued job never runs (and leaves its RQ queue); a running one
stops between batches, in a real `memvault worker` and in the server's own threads, keeping what
it did; a finished job is 409; another tenant's job is 404."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from rq import Queue
from rq.job import Job as RQJob
from sqlalchemy import text

from memvault.api import NamespaceAPI
from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from memvault.memories.schemas import MemoryIn
from tests.conftest import Tenant, running
from tests.jobs.helpers import JOB_DEADLINE_S, Worker, all_memories, new_id, start, wait_for_job
from tests.jobs.test_tasks import events_body, ingest
from tests.jobs.test_worker import expected_contents, long_conversation
from tests.maintenance.helpers import owner_sql

DUPLICATES = ["The user's cat is called Miso", "the user's cat is called  miso"]
FINISHED = ("succeeded", "failed", "cancelled")


async def organize(client: httpx.AsyncClient, t: Tenant, body: dict[str, Any]) -> str:
    r = await client.post(f"/v1/namespaces/{t.namespace}/organize", json=body, headers=t.headers)
    assert r.status_code == 202, r.text
    return r.json()["job_id"]


async def cancel(client: httpx.AsyncClient, t: Tenant, job_id: str) -> httpx.Response:
    return await client.post(f"/v1/jobs/{job_id}/cancel", headers=t.headers)


async def live(api: NamespaceAPI, t: Tenant) -> int:
    return len([m for m in await all_memories(api, t.principal) if m.superseded_at is None])


async def wait_until_running(client: httpx.AsyncClient, t: Tenant, job_id: str, logs: list[Path]) -> dict[str, Any]:
    """Until the job has committed some of its work (progress > 0) and is still at it."""
    deadline = time.monotonic() + JOB_DEADLINE_S
    while True:
        body = (await client.get(f"/v1/jobs/{job_id}", headers=t.headers)).json()
        if body["status"] == "running" and (body["progress"] or 0) > 0:
            return body
        assert body["status"] in ("queued", "running"), body
        assert time.monotonic() < deadline, (body, [p.read_text()[-3000:] for p in logs])
        await asyncio.sleep(0.01)


async def old_model_count(api: NamespaceAPI, t: Tenant) -> int:
    async with api._db.owner() as s:
        n = await s.scalar(
            text("SELECT count(*) FROM memories WHERE tenant_id = :t AND embedding_model = 'old-model'"), {"t": t.id}
        )
    return int(n or 0)


class TestCancelQueued:
    async def test_a_queued_job_is_cancelled_and_never_runs(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, redis_url: str
    ) -> None:
        await api.store_many(tenant_a.principal, "default", [MemoryIn(content=c) for c in DUPLICATES])
        job_id = await organize(client, tenant_a, {"jobs": ["dedup"]})
        conn = redis.Redis.from_url(redis_url)
        assert RQJob.fetch(job_id, connection=conn).get_status() == "queued"

        r = await cancel(client, tenant_a, job_id)

        assert r.status_code == 200, r.text
        body = r.json()
        assert body["status"] == "cancelled" and body["attempts"] == 0 and body["started_at"] is None
        assert body["finished_at"] is not None and body["cancel_requested_at"] is not None
        # Off its RQ queue: no worker will spend a turn on it.
        assert RQJob.fetch(job_id, connection=conn).get_status() == "canceled"
        assert job_id not in Queue("maintenance", connection=conn).job_ids
        conn.close()
        # A runner that reaches it anyway (a duplicate message, a recovery sweep) skips it.
        outcome = await api.run_job(tenant_a.principal, body["id"])
        assert (outcome.status, outcome.result) == ("skipped", {"reason": "cancelled"})
        after = (await client.get(f"/v1/jobs/{job_id}", headers=tenant_a.headers)).json()
        assert after["status"] == "cancelled" and after["attempts"] == 0 and after["result"] is None
        assert await live(api, tenant_a) == 2  # the duplicates were not merged
        audit = await client.get("/v1/audit", params={"action": "job.cancel"}, headers=tenant_a.headers)
        assert [(e["target_id"], e["detail"]["was"]) for e in audit.json()["data"]] == [(job_id, "queued")]

        # Cancelling again changes nothing and is not an error (a retried request).
        again = await cancel(client, tenant_a, job_id)
        assert again.status_code == 200 and again.json() == after

    async def test_a_finished_job_is_409(self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant) -> None:
        job_id = await organize(client, tenant_a, {"jobs": ["promote"]})
        done = await api.run_job(tenant_a.principal, uuid.UUID(job_id))
        assert done.status == "succeeded"

        r = await cancel(client, tenant_a, job_id)

        assert r.status_code == 409, r.text
        assert r.json()["code"] == "job_finished" and r.json()["job_status"] == "succeeded"
        assert (await client.get(f"/v1/jobs/{job_id}", headers=tenant_a.headers)).json()["status"] == "succeeded"

    async def test_another_tenants_job_is_404_and_stays_queued(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant, redis_url: str
    ) -> None:
        job_id = await organize(client, tenant_a, {"jobs": ["decay"]})

        r = await cancel(client, tenant_b, job_id)

        assert r.status_code == 404 and r.json()["code"] == "job_not_found"
        assert (await client.get(f"/v1/jobs/{job_id}", headers=tenant_a.headers)).json()["status"] == "queued"
        conn = redis.Redis.from_url(redis_url)
        assert RQJob.fetch(job_id, connection=conn).get_status() == "queued"
        conn.close()

    async def test_a_key_of_another_namespace_gets_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        job_id = await organize(client, tenant_a, {"jobs": ["decay"]})
        r = await client.post("/v1/namespaces", json={"name": "elsewhere"}, headers=tenant_a.headers)
        assert r.status_code == 201, r.text
        r = await client.post(
            "/v1/keys",
            json={"name": "limited", "scopes": ["write"], "namespaces": ["elsewhere"]},
            headers=tenant_a.headers,
        )
        limited = {"Authorization": f"Bearer {r.json()['key']}"}

        r = await client.post(f"/v1/jobs/{job_id}/cancel", headers=limited)

        assert r.status_code == 404 and r.json()["code"] == "job_not_found"
        assert (await client.get(f"/v1/jobs/{job_id}", headers=tenant_a.headers)).json()["status"] == "queued"


@pytest.mark.slow  # a real `memvault worker` process
class TestCancelRunning:
    async def test_a_worker_stops_a_running_organize_between_batches(
        self,
        client: httpx.AsyncClient,
        api: NamespaceAPI,
        tenant_a: Tenant,
        settings: Settings,
        redis_url: str,
        tmp_path: Path,
        workers: list[Worker],
    ) -> None:
        total = 600
        await api.store_many(
            tenant_a.principal, "default", [MemoryIn(content=f"Fact number {i} about the user") for i in range(total)]
        )
        await owner_sql(api, "UPDATE memories SET embedding_model = 'old-model' WHERE tenant_id = :t", t=tenant_a.id)
        # Small batches, so that re-embedding takes many of them.
        start(workers, settings, redis_url, tmp_path, recover=False, env={"MEMVAULT_EMBEDDING_BATCH_SIZE": "4"})
        job_id = await organize(client, tenant_a, {"jobs": ["reembed", "dedup"], "budget_ms": 600_000})
        await wait_until_running(client, tenant_a, job_id, [tmp_path / "worker.log"])

        r = await cancel(client, tenant_a, job_id)

        assert r.status_code == 202, r.text
        assert r.json()["status"] == "running" and r.json()["cancel_requested_at"] is not None
        job = await wait_for_job(client, tenant_a.headers, job_id, until=FINISHED)
        assert job["status"] == "cancelled", (job, (tmp_path / "worker.log").read_text()[-3000:])
        assert job["attempts"] == 1 and job["finished_at"] is not None
        result = job["result"]
        assert result["cancelled"] is True
        assert result["reembed"]["complete"] is False
        assert 0 < result["reembed"]["reembedded"] < total
        assert result["dedup"] == {"skipped": "cancelled"}
        # What it did is kept, and it did nothing after it stopped.
        left = await old_model_count(api, tenant_a)
        assert left == total - result["reembed"]["reembedded"]
        await asyncio.sleep(1)
        assert await old_model_count(api, tenant_a) == left

    async def test_the_server_stops_a_running_extraction_between_chunks(
        self, settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        local = settings.model_copy(
            update={"redis_url": None, "job_recover_on_start": False, "job_cancel_poll_s": 0.05}
        )
        messages = long_conversation()
        async with running(create_app(local, urls=pg_urls, embedder=embedder)) as app:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test") as inproc:
                out = await ingest(inproc, tenant_a, events_body("s-" + new_id(), messages))
                await wait_until_running(inproc, tenant_a, out["job_id"], [])

                r = await cancel(inproc, tenant_a, out["job_id"])

                assert r.status_code == 202, r.text
                job = await wait_for_job(inproc, tenant_a.headers, out["job_id"], until=FINISHED)
        assert job["status"] == "cancelled", job
        result = job["result"]
        assert result["cancelled"] is True and 0 < result["events_left"] < len(messages)
        mems = await all_memories(api, tenant_a.principal)
        assert 0 < len(mems) < len(await expected_contents(messages))
        assert len(mems) == result["memories_created"]
        # Every memory cites events of the chunks that ran; none of the events left.
        cited = {e for m in mems for e in m.source_event_ids}
        assert len(cited) <= len(messages) - result["events_left"]
