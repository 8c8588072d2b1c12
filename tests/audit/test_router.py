"""GET /v1/audit: every write and delete, who and when, never the content; admin only, scoped to
the tenant and to a limited key's namespaces."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import Tenant
from tests.memories.test_router import problem

AUDIT = "/v1/audit"
MEMORIES = "/v1/namespaces/default/memories"


async def entries(client: httpx.AsyncClient, headers: dict[str, str], **params: object) -> list[dict]:
    r = await client.get(AUDIT, params=params, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()["data"]


class TestAuditLog:
    async def test_records_writes_and_deletes_without_content(self, client: httpx.AsyncClient, tenant_a: Tenant):
        r = await client.post(MEMORIES, json={"content": "Ana's passport expires in May"}, headers=tenant_a.headers)
        mid = r.json()["id"]
        await client.patch(f"{MEMORIES}/{mid}", json={"importance": 1}, headers=tenant_a.headers)
        await client.delete(f"{MEMORIES}/{mid}", headers=tenant_a.headers)

        log = await entries(client, tenant_a.headers, target_id=mid)
        assert [e["action"] for e in log] == ["memory.delete", "memory.update", "memory.create"]
        assert all(e["actor"].startswith("key:") and e["namespace"] == "default" for e in log)
        assert log[1]["detail"] == {"fields": ["importance"]}
        assert "passport" not in str(log)

    async def test_filters_by_action_prefix_and_pages(self, client: httpx.AsyncClient, tenant_a: Tenant):
        for i in range(5):
            await client.post(MEMORIES, json={"content": f"note {i}"}, headers=tenant_a.headers)
        seen: list[int] = []
        cursor = None
        while True:
            params = {"action": "memory", "limit": 2, **({"cursor": cursor} if cursor else {})}
            r = await client.get(AUDIT, params=params, headers=tenant_a.headers)
            assert r.status_code == 200, r.text
            page = r.json()
            seen += [e["id"] for e in page["data"]]
            assert all(e["action"].startswith("memory.") for e in page["data"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert len(seen) == 5 and seen == sorted(seen, reverse=True) and len(set(seen)) == 5

    async def test_needs_admin_scope(self, client: httpx.AsyncClient, tenant_a: Tenant):
        r = await client.post("/v1/keys", json={"scopes": ["read", "write"]}, headers=tenant_a.headers)
        headers = {"Authorization": f"Bearer {r.json()['key']}"}
        problem(await client.get(AUDIT, headers=headers), 403, "forbidden")

    async def test_limited_admin_sees_only_its_namespaces(self, client: httpx.AsyncClient, tenant_a: Tenant):
        await client.post("/v1/namespaces", json={"name": "ops"}, headers=tenant_a.headers)
        await client.post("/v1/namespaces/ops/memories", json={"content": "in ops"}, headers=tenant_a.headers)
        await client.post(MEMORIES, json={"content": "in default"}, headers=tenant_a.headers)
        r = await client.post("/v1/keys", json={"scopes": ["admin"], "namespaces": ["ops"]}, headers=tenant_a.headers)
        limited = {"Authorization": f"Bearer {r.json()['key']}"}
        assert {e["namespace"] for e in await entries(client, limited)} == {"ops"}
        problem(await client.get(AUDIT, params={"namespace": "default"}, headers=limited), 403, "forbidden")
        assert {e["namespace"] for e in await entries(client, tenant_a.headers, namespace="default")} == {"default"}

    async def test_bad_input(self, client: httpx.AsyncClient, tenant_a: Tenant):
        problem(await client.get(AUDIT, params={"cursor": "abc"}, headers=tenant_a.headers), 422, "validation_error")
        problem(await client.get(AUDIT, params={"limit": 0}, headers=tenant_a.headers), 422, "validation_error")
        problem(await client.get(AUDIT, params={"since": "soon"}, headers=tenant_a.headers), 422, "validation_error")
        r = await client.get(AUDIT, params={"namespace": "nope"}, headers=tenant_a.headers)
        problem(r, 404, "namespace_not_found")

    async def test_filters_by_actor_and_before_an_instant(self, client: httpx.AsyncClient, tenant_a: Tenant):
        r = await client.post("/v1/keys", json={"scopes": ["admin"]}, headers=tenant_a.headers)
        other = r.json()
        await client.post(
            MEMORIES, json={"content": "by the other key"}, headers={"Authorization": f"Bearer {other['key']}"}
        )
        await client.post(MEMORIES, json={"content": "by the first key"}, headers=tenant_a.headers)

        mine = await entries(client, tenant_a.headers, actor=f"key:{other['id']}")
        assert [e["action"] for e in mine] == ["memory.create"] and mine[0]["actor_email"] is None
        before = await entries(client, tenant_a.headers, until=mine[0]["at"])
        assert [e["action"] for e in before][:1] == ["key.create"]
        assert await entries(client, tenant_a.headers, actor="nobody@example.com") == []


class TestOtherTenant:
    async def test_other_tenant_sees_nothing(self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant):
        r = await client.post(MEMORIES, json={"content": "A's memory"}, headers=tenant_a.headers)
        mid = r.json()["id"]
        assert await entries(client, tenant_b.headers, target_id=mid) == []
        assert all(e["target_id"] != mid for e in await entries(client, tenant_b.headers, limit=500))


class TestBadFilters:
    """These were 500s: PostgreSQL refuses NUL in text, and the cursor is compared as a bigint."""

    @pytest.mark.parametrize("param", ["namespace", "action", "target_id", "actor", "cursor"])
    async def test_nul_in_a_filter_is_422(self, client: httpx.AsyncClient, tenant_a: Tenant, param: str) -> None:
        r = await client.get(AUDIT, params={param: "a\x00b"}, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == param

    @pytest.mark.parametrize("cursor", [str(2**63), "9" * 30, "\u0663", "\u00b2"])
    async def test_cursor_beyond_a_bigint_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, cursor: str
    ) -> None:
        r = await client.get(AUDIT, params={"cursor": cursor}, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == "cursor"

    async def test_largest_cursor_is_an_empty_page(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.get(AUDIT, params={"cursor": str(2**63 - 1)}, headers=tenant_a.headers)

        assert r.status_code == 200, r.text
