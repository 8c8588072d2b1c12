"""Contradictions over REST: marked, listed by state, shown on search hits until resolved,
resolved by id or by pair, bad input and tenant isolation."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import Tenant
from tests.memories.test_router import problem

NS = "/v1/namespaces/default"
MISSING_ID = "00000000-0000-4000-8000-000000000000"


async def remember(client: httpx.AsyncClient, tenant: Tenant, content: str) -> dict[str, Any]:
    r = await client.post(f"{NS}/memories", json={"content": content}, headers=tenant.headers)
    assert r.status_code == 201, r.text
    return r.json()


async def contradicted_by(client: httpx.AsyncClient, tenant: Tenant, query: str) -> dict[str, list[str]]:
    r = await client.post(f"{NS}/search", json={"query": query}, headers=tenant.headers)
    assert r.status_code == 200, r.text
    return {hit["memory"]["id"]: hit["contradicted_by"] for hit in r.json()["results"]}


class TestLifecycle:
    async def test_mark_list_search_resolve(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        h = tenant_a.headers
        tea = await remember(client, tenant_a, "Ana drinks green tea every morning")
        coffee = await remember(client, tenant_a, "Ana drinks black coffee every morning")

        r = await client.post(
            f"{NS}/contradictions", json={"memory_id": tea["id"], "other_id": coffee["id"]}, headers=h
        )

        assert r.status_code == 201, r.text
        mark = r.json()
        assert await contradicted_by(client, tenant_a, "what does Ana drink in the morning?") == {
            tea["id"]: [coffee["id"]],
            coffee["id"]: [tea["id"]],
        }
        opened = (await client.get(f"{NS}/contradictions", params={"state": "open"}, headers=h)).json()
        assert [c["id"] for c in opened["data"]] == [mark["id"]]
        by_memory = (await client.get(f"{NS}/contradictions", params={"memory_id": coffee["id"]}, headers=h)).json()
        assert [c["id"] for c in by_memory["data"]] == [mark["id"]]

        r = await client.post(
            f"{NS}/contradictions/{mark['id']}/resolve",
            json={"resolution": "keep_one", "keep_id": coffee["id"], "note": "switched last year"},
            headers=h,
        )

        assert r.status_code == 200, r.text
        assert r.json()["kept_id"] == coffee["id"] and r.json()["resolution_note"] == "switched last year"
        assert (await client.get(f"{NS}/memories/{tea['id']}", headers=h)).json()["state"] == "archived"
        assert await contradicted_by(client, tenant_a, "what does Ana drink in the morning?") == {coffee["id"]: []}
        assert (await client.get(f"{NS}/contradictions", params={"state": "open"}, headers=h)).json()["data"] == []
        resolved = (await client.get(f"{NS}/contradictions", params={"state": "resolved"}, headers=h)).json()
        assert [c["id"] for c in resolved["data"]] == [mark["id"]]
        # The same resolution again is answered alike; a different one is a conflict.
        again = await client.post(
            f"{NS}/contradictions/{mark['id']}/resolve",
            json={"resolution": "keep_one", "keep_id": coffee["id"]},
            headers=h,
        )
        assert again.status_code == 200
        other = await client.post(
            f"{NS}/contradictions/{mark['id']}/resolve", json={"resolution": "keep_both"}, headers=h
        )
        problem(other, 409, "contradiction_resolved")

    async def test_resolved_by_pair(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        a = await remember(client, tenant_a, "The launch is on Monday")
        b = await remember(client, tenant_a, "The launch is on Friday")
        await client.post(
            f"{NS}/contradictions", json={"memory_id": a["id"], "other_id": b["id"]}, headers=tenant_a.headers
        )

        r = await client.post(
            f"{NS}/contradictions/resolve",
            json={"memory_id": b["id"], "other_id": a["id"], "resolution": "note", "note": "ask the PM"},
            headers=tenant_a.headers,
        )

        assert r.status_code == 200, r.text
        assert r.json()["resolution"] == "note" and r.json()["kept_id"] is None
        assert (await client.get(f"{NS}/memories/{a['id']}", headers=tenant_a.headers)).json()["state"] == "stable"


class TestBadInput:
    async def test_problems(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        h = tenant_a.headers
        a = await remember(client, tenant_a, "Ana is 41")
        b = await remember(client, tenant_a, "Ana is 42")
        marks = f"{NS}/contradictions"

        problem(
            await client.post(marks, json={"memory_id": a["id"], "other_id": a["id"]}, headers=h),
            422,
            "validation_error",
        )
        problem(
            await client.post(marks, json={"memory_id": a["id"], "other_id": MISSING_ID}, headers=h),
            404,
            "memory_not_found",
        )
        problem(
            await client.post(f"{marks}/{MISSING_ID}/resolve", json={"resolution": "keep_both"}, headers=h),
            404,
            "contradiction_not_found",
        )
        problem(
            await client.post(
                f"{marks}/resolve",
                json={"memory_id": a["id"], "other_id": b["id"], "resolution": "keep_both"},
                headers=h,
            ),
            404,
            "contradiction_not_found",
        )
        problem(
            await client.post(f"{marks}/resolve", json={"resolution": "keep_both"}, headers=h), 422, "validation_error"
        )
        problem(await client.get(marks, params={"state": "closed"}, headers=h), 422, "validation_error")


class TestTenants:
    async def test_other_tenant_sees_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        a = await remember(client, tenant_a, "Ana lives in Oslo")
        b = await remember(client, tenant_a, "Ana lives in Bergen")
        r = await client.post(
            f"{NS}/contradictions", json={"memory_id": a["id"], "other_id": b["id"]}, headers=tenant_a.headers
        )
        mark = r.json()
        own = await remember(client, tenant_b, "Ana lives in Oslo")

        assert (await client.get(f"{NS}/contradictions", headers=tenant_b.headers)).json()["data"] == []
        problem(
            await client.post(
                f"{NS}/contradictions", json={"memory_id": own["id"], "other_id": a["id"]}, headers=tenant_b.headers
            ),
            404,
            "memory_not_found",
        )
        problem(
            await client.post(
                f"{NS}/contradictions/{mark['id']}/resolve", json={"resolution": "keep_both"}, headers=tenant_b.headers
            ),
            404,
            "contradiction_not_found",
        )
        assert await contradicted_by(client, tenant_b, "where does Ana live?") == {own["id"]: []}
        listed = (await client.get(f"{NS}/contradictions", params={"state": "open"}, headers=tenant_a.headers)).json()
        assert [c["id"] for c in listed["data"]] == [mark["id"]]
