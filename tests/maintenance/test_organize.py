"""POST /v1/namespaces/{ns}/organize over HTTP, the job running on the server's threads."""

from __future__ import annotations

import httpx
import pytest

from memvault.api import NamespaceAPI
from memvault.maintenance.schemas import OrganizeIn, Step
from tests.conftest import Tenant
from tests.jobs.helpers import wait_for_job
from tests.maintenance.helpers import set_fields, store
from tests.memories.test_router import problem


class TestOrganize:
    async def test_runs_the_steps_in_order_and_reports_each(
        self, inproc: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        old, *_ = await store(
            api,
            tenant_a,
            {"content": "The user once owned a red bicycle"},
            {"content": "The user's cat is called Miso", "state": "tentative"},
            {"content": "The user's cat is named Miso", "state": "tentative"},
        )
        await set_fields(api, old.id, "created_at = now() - interval '400 days'")

        r = await inproc.post(
            "/v1/namespaces/default/organize",
            json={"jobs": ["dedup", "promote", "decay", "reembed"], "budget_ms": 600000},
            headers=tenant_a.headers,
        )

        assert r.status_code == 202, r.text
        body = r.json()
        assert r.headers["Location"] == f"/v1/jobs/{body['job_id']}"
        assert body["jobs"] == ["dedup", "promote", "decay", "reembed"] and body["budget_ms"] == 600000
        job = await wait_for_job(inproc, tenant_a.headers, body["job_id"])
        assert job["status"] == "succeeded" and job["kind"] == "organize" and job["namespace"] == "default", job
        result = job["result"]
        assert result["order"] == ["dedup", "promote", "decay", "reembed"]
        assert result["dedup"]["merged_near"] == 1
        assert result["promote"]["promoted"] == 1  # the merged memory counts two mentions
        assert result["decay"]["archived"] == 1
        assert result["reembed"]["reembedded"] == 0
        assert result["budget_ms"] == 600000 and all(result[s]["complete"] for s in body["jobs"])

        # Another tenant's key does not see the job.
        problem(await inproc.get(f"/v1/jobs/{body['job_id']}", headers=tenant_b.headers), 404, "job_not_found")

    async def test_default_runs_every_step(self, inproc: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await inproc.post("/v1/namespaces/default/organize", json={}, headers=tenant_a.headers)
        assert r.status_code == 202, r.text
        assert r.json()["jobs"] == ["reembed", "dedup", "promote", "decay"]
        job = await wait_for_job(inproc, tenant_a.headers, r.json()["job_id"])
        assert job["status"] == "succeeded" and set(job["result"]) >= {"reembed", "dedup", "promote", "decay"}

    async def test_steps_past_the_budget_are_skipped(self, api: NamespaceAPI, tenant_a: Tenant) -> None:
        out = await api.organize(tenant_a.principal, "default", OrganizeIn(jobs=[Step.dedup, Step.decay], budget_ms=1))
        result = (await api.run_job(tenant_a.principal, out.job_id)).result
        assert result["budget_ms"] == 1 and result["order"] == ["dedup", "decay"]
        # A step that started says whether it finished; once the budget is spent nothing starts.
        for step in ("dedup", "decay"):
            assert result[step] == {"skipped": "budget"} or isinstance(result[step]["complete"], bool)
        assert result["decay"] == {"skipped": "budget"} or result["dedup"]["complete"] is True

    @pytest.mark.parametrize(
        "body",
        [
            {"jobs": ["defrag"]},
            {"jobs": []},
            {"jobs": ["dedup", "dedup"]},
            {"budget_ms": 0},
            {"budget_ms": 600001},
            {"budget_ms": "soon"},
            {"jobs": ["dedup"], "priority": "high"},
        ],
    )
    async def test_bad_bodies_are_422(self, client: httpx.AsyncClient, tenant_a: Tenant, body: dict) -> None:
        r = await client.post("/v1/namespaces/default/organize", json=body, headers=tenant_a.headers)
        problem(r, 422, "validation_error")

    async def test_unknown_namespace_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post("/v1/namespaces/nope/organize", json={}, headers=tenant_a.headers)
        problem(r, 404, "namespace_not_found")

    async def test_read_key_may_not_organize(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post("/v1/keys", json={"name": "reader", "scopes": ["read"]}, headers=tenant_a.headers)
        reader = {"Authorization": f"Bearer {r.json()['key']}"}
        r = await client.post("/v1/namespaces/default/organize", json={}, headers=reader)
        assert r.status_code == 403, r.text

    async def test_audited(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post("/v1/namespaces/default/organize", json={"jobs": ["decay"]}, headers=tenant_a.headers)
        job_id = r.json()["job_id"]
        audit = await client.get("/v1/audit", params={"action": "namespace.organize"}, headers=tenant_a.headers)
        assert [e["target_id"] for e in audit.json()["data"]] == [job_id]


class TestSingleStepJobs:
    @pytest.mark.parametrize("kind", ["dedup", "decay", "promote", "reembed"])
    async def test_each_step_is_a_job_kind(self, api: NamespaceAPI, tenant_a: Tenant, kind: str) -> None:
        from memvault.jobs import queue_for
        from memvault.jobs import repository as jobs_repo

        await store(
            api, tenant_a, {"content": "The user's cat is called Miso"}, {"content": "the user's cat is called miso"}
        )
        async with api._db.tenant_tx(tenant_a.id) as tx:
            ns = await api._namespace(tx, tenant_a.principal, "default")
            job, _ = await jobs_repo.create(
                tx.session,
                tenant_a.id,
                namespace_id=ns.id,
                kind=kind,
                payload={"namespace": "default"},
                job_key=None,
                created_by="test",
            )
        outcome = await api.run_job(tenant_a.principal, job.id)
        assert outcome.status == "succeeded", outcome
        assert outcome.result["order"] == [kind] and outcome.result[kind]["complete"] is True
        assert queue_for(kind) == "maintenance"
