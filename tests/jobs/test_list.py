"""GET /v1/jobs: the tenant's jobs newest first, by state and namespace, in pages; a
namespace-limited key sees its namespaces' jobs; another tenant's are never there."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import Tenant
from tests.memories.test_router import problem

JOBS = "/v1/jobs"


async def organize(client: httpx.AsyncClient, t: Tenant, step: str = "promote", ns: str | None = None) -> str:
    r = await client.post(f"/v1/namespaces/{ns or t.namespace}/organize", json={"jobs": [step]}, headers=t.headers)
    assert r.status_code == 202, r.text
    return str(r.json()["job_id"])


async def listed(client: httpx.AsyncClient, headers: dict[str, str], **params: Any) -> dict[str, Any]:
    r = await client.get(JOBS, params=params, headers=headers)
    assert r.status_code == 200, r.text
    return dict(r.json())


class TestList:
    async def test_newest_first_in_pages_that_neither_skip_nor_repeat(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        made = [await organize(client, tenant_a) for _ in range(5)]
        seen: list[str] = []
        cursor = None
        while True:
            page = await listed(client, tenant_a.headers, limit=2, **({"cursor": cursor} if cursor else {}))
            seen += [j["id"] for j in page["data"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == list(reversed(made))

    async def test_by_state_and_namespace(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        first = await organize(client, tenant_a)
        r = await client.post(f"{JOBS}/{first}/cancel", headers=tenant_a.headers)
        assert r.status_code == 200, r.text
        await client.post("/v1/namespaces", json={"name": "ops"}, headers=tenant_a.headers)
        in_ops = await organize(client, tenant_a, ns="ops")

        cancelled = (await listed(client, tenant_a.headers, state="cancelled"))["data"]
        assert [(j["id"], j["status"]) for j in cancelled] == [(first, "cancelled")]
        assert [j["id"] for j in (await listed(client, tenant_a.headers, namespace="ops"))["data"]] == [in_ops]
        assert [j["id"] for j in (await listed(client, tenant_a.headers, state="queued"))["data"]] == [in_ops]
        problem(await client.get(JOBS, params={"state": "asleep"}, headers=tenant_a.headers), 422, "validation_error")
        problem(await client.get(JOBS, params={"cursor": "nope"}, headers=tenant_a.headers), 422, "validation_error")
        problem(
            await client.get(JOBS, params={"namespace": "nope"}, headers=tenant_a.headers), 404, "namespace_not_found"
        )

    async def test_a_namespace_limited_key_sees_its_namespaces_jobs(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        await client.post("/v1/namespaces", json={"name": "ops"}, headers=tenant_a.headers)
        await organize(client, tenant_a)
        in_ops = await organize(client, tenant_a, ns="ops")
        r = await client.post("/v1/keys", json={"scopes": ["read"], "namespaces": ["ops"]}, headers=tenant_a.headers)
        limited = {"Authorization": f"Bearer {r.json()['key']}"}

        assert [j["id"] for j in (await listed(client, limited))["data"]] == [in_ops]
        problem(await client.get(JOBS, params={"namespace": "default"}, headers=limited), 403, "forbidden")


class TestOtherTenant:
    async def test_other_tenant_sees_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        job_id = await organize(client, tenant_a)

        page = await listed(client, tenant_b.headers, limit=200)

        assert job_id not in [j["id"] for j in page["data"]]
