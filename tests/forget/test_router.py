"""POST /v1/namespaces/{ns}/forget: soft archive and hard erase by user, session, entity or the
whole namespace, checked with raw SQL: a hard forget leaves no copy anywhere."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from memvault.api import NamespaceAPI
from tests.conftest import Tenant
from tests.memories.test_router import problem

NS = "/v1/namespaces/default"
FORGET = f"{NS}/forget"


async def post(client: httpx.AsyncClient, tenant: Tenant, path: str, body: dict[str, Any], status: int) -> Any:
    r = await client.post(f"{NS}{path}", json=body, headers=tenant.headers)
    assert r.status_code == status, r.text
    return r.json()


async def seed(client: httpx.AsyncClient, tenant: Tenant, user: str, session: str, marker: str) -> dict[str, Any]:
    """A user's memories (two versions of one), a conversation, a trace and an entity link."""
    entity = await post(client, tenant, "/entities", {"name": f"{user.title()} {marker}", "type": "person"}, 201)
    v1 = await post(
        client, tenant, "/memories", {"content": f"{user} lives in Oslo {marker}", "user_id": user, "key": "city"}, 201
    )
    v2 = await post(
        client,
        tenant,
        "/memories",
        {"content": f"{user} lives in Bergen {marker}", "user_id": user, "key": "city", "entity_ids": [entity["id"]]},
        201,
    )
    await post(
        client,
        tenant,
        "/events",
        {
            "session_id": session,
            "user_id": user,
            "messages": [
                {"role": "user", "content": f"I moved to Bergen {marker}"},
                {"role": "assistant", "content": f"Noted, {user} {marker}"},
            ],
        },
        202,
    )
    trace = await post(client, tenant, "/traces", {"task": f"plan {user}'s move {marker}", "user_id": user}, 201)
    await post(client, tenant, f"/traces/{trace['id']}/steps", {"thought": f"book movers {marker}"}, 201)
    return {"entity": entity, "v1": v1, "v2": v2, "trace": trace}


async def traces_of(api: NamespaceAPI, tenant_id: uuid.UUID, marker: str) -> dict[str, int]:
    """Rows anywhere in the tenant that still hold the marker text (or point at rows that did)."""
    queries = {
        "memories": "SELECT count(*) FROM memories WHERE tenant_id = :t AND content LIKE :m",
        "memory_history": "SELECT count(*) FROM memory_history WHERE tenant_id = :t AND snapshot::text LIKE :m",
        "memory_entities": "SELECT count(*) FROM memory_entities me JOIN entities e ON e.tenant_id = me.tenant_id "
        "AND e.id = me.entity_id WHERE me.tenant_id = :t AND e.name LIKE :m",
        "events": "SELECT count(*) FROM events WHERE tenant_id = :t AND content LIKE :m",
        "sessions": "SELECT count(*) FROM sessions s WHERE tenant_id = :t AND NOT EXISTS (SELECT 1 FROM events e "
        "WHERE e.tenant_id = s.tenant_id AND e.session_id = s.id)",
        "traces": "SELECT count(*) FROM traces WHERE tenant_id = :t AND task LIKE :m",
        "trace_steps": "SELECT count(*) FROM trace_steps WHERE tenant_id = :t AND thought LIKE :m",
        "audit_log": "SELECT count(*) FROM audit_log WHERE tenant_id = :t AND (detail::text LIKE :m "
        "OR coalesce(target_id, '') LIKE :m)",
    }
    async with api._db.owner() as s:
        return {
            name: int((await s.execute(text(q), {"t": tenant_id, "m": f"%{marker}%"})).scalar_one())
            for name, q in queries.items()
        }


async def last_vacuum(api: NamespaceAPI) -> datetime | None:
    async with api._db.owner() as s:
        return await s.scalar(text("SELECT last_vacuum FROM pg_stat_user_tables WHERE relname = 'memories'"))


class TestHardForget:
    async def test_by_user_leaves_no_trace(self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant):
        marker = uuid.uuid4().hex
        await seed(client, tenant_a, "ana", "s-ana", marker)
        other = uuid.uuid4().hex
        await seed(client, tenant_a, "bob", "s-bob", other)
        before = await traces_of(api, tenant_a.id, marker)
        assert before["memories"] == 2 and before["events"] == 2 and before["memory_entities"] == 1
        vacuumed_before = await last_vacuum(api)

        out = await post(client, tenant_a, "/forget", {"user_id": "ana", "hard": True}, 200)
        assert (out["memories"], out["events"], out["sessions"], out["traces"]) == (2, 2, 1, 1)

        left = await traces_of(api, tenant_a.id, marker)
        # The entity named after ana stays (forget by entity removes it); its link to her memory is gone.
        assert left == dict.fromkeys(left, 0), left
        # Bob is untouched.
        assert (await traces_of(api, tenant_a.id, other))["memories"] == 2
        r = await client.get(f"{NS}/sessions/s-ana", headers=tenant_a.headers)
        problem(r, 404, "session_not_found")
        # The indexes were cleaned now, not at some later autovacuum.
        for _ in range(50):
            after = await last_vacuum(api)
            if after is not None and (vacuumed_before is None or after > vacuumed_before):
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("no VACUUM ran after the hard forget")
        r = await client.get("/v1/audit", params={"action": "forget"}, headers=tenant_a.headers)
        (entry,) = r.json()["data"]
        assert entry["action"] == "forget.hard" and entry["detail"]["memories"] == 2
        assert "ana" not in str(entry)

    async def test_by_session(self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant):
        marker = uuid.uuid4().hex
        await seed(client, tenant_a, "ana", "s1", marker)
        await post(client, tenant_a, "/memories", {"content": f"in session {marker}", "session_id": "s1"}, 201)
        out = await post(client, tenant_a, "/forget", {"session_id": "s1", "hard": True}, 200)
        assert (out["memories"], out["events"], out["sessions"]) == (1, 2, 1)
        left = await traces_of(api, tenant_a.id, marker)
        assert left["events"] == 0 and left["memories"] == 2  # ana's user memories stay

    async def test_by_entity_removes_linked_memories_and_the_entity(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ):
        marker = uuid.uuid4().hex
        seeded = await seed(client, tenant_a, "ana", "s1", marker)
        out = await post(client, tenant_a, "/forget", {"entity_id": seeded["entity"]["id"], "hard": True}, 200)
        # The linked version and its superseded predecessor go together.
        assert (out["memories"], out["entities"]) == (2, 1)
        r = await client.get(f"{NS}/entities/{seeded['entity']['id']}", headers=tenant_a.headers)
        assert r.status_code == 404
        assert (await traces_of(api, tenant_a.id, marker))["memories"] == 0

    async def test_whole_namespace_needs_admin(self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant):
        marker = uuid.uuid4().hex
        await seed(client, tenant_a, "ana", "s1", marker)
        r = await client.post("/v1/keys", json={"scopes": ["read", "write"]}, headers=tenant_a.headers)
        writer = {"Authorization": f"Bearer {r.json()['key']}"}
        r = await client.post(FORGET, json={"all": True, "hard": True}, headers=writer)
        problem(r, 403, "forbidden")
        out = await post(client, tenant_a, "/forget", {"all": True, "hard": True}, 200)
        assert out["memories"] == 2 and out["entities"] == 1
        left = await traces_of(api, tenant_a.id, marker)
        assert all(v == 0 for k, v in left.items()), left
        r = await client.get(f"{NS}", headers=tenant_a.headers)
        assert r.status_code == 200  # the namespace itself stays


class TestSoftForget:
    async def test_archives_and_can_be_undone(self, client: httpx.AsyncClient, tenant_a: Tenant):
        marker = uuid.uuid4().hex
        seeded = await seed(client, tenant_a, "ana", "s1", marker)
        out = await post(client, tenant_a, "/forget", {"user_id": "ana"}, 200)
        assert out["memories"] == 1 and out["events"] == 0  # the current version; events are kept
        r = await client.get(f"{NS}/memories", params={"user_id": "ana"}, headers=tenant_a.headers)
        assert r.json()["data"] == []
        r = await client.post(f"{NS}/memories/{seeded['v2']['id']}/promote", headers=tenant_a.headers)
        assert r.status_code == 200 and r.json()["state"] == "stable"


class TestBadInput:
    @pytest.mark.parametrize(
        "body",
        [
            {},
            {"hard": True},
            {"user_id": "a", "session_id": "b"},
            {"user_id": "a", "all": True},
            {"entity_id": "not-a-uuid"},
            {"user_id": ""},
            {"user_id": "a", "hard": "yes please"},
            {"user_id": "a", "extra": 1},
        ],
    )
    async def test_is_422(self, client: httpx.AsyncClient, tenant_a: Tenant, body: dict[str, Any]):
        problem(await client.post(FORGET, json=body, headers=tenant_a.headers), 422, "validation_error")

    async def test_unknown_entity_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant):
        r = await client.post(FORGET, json={"entity_id": str(uuid.uuid4())}, headers=tenant_a.headers)
        problem(r, 404, "entity_not_found")


class TestOtherTenant:
    async def test_cannot_forget_another_tenants_data(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
    ):
        marker = uuid.uuid4().hex
        seeded = await seed(client, tenant_a, "ana", "s1", marker)
        for body in ({"user_id": "ana", "hard": True}, {"all": True, "hard": True}, {"session_id": "s1", "hard": True}):
            out = await post(client, tenant_b, "/forget", body, 200)
            assert out["memories"] == out["events"] == out["sessions"] == 0
        r = await client.post(FORGET, json={"entity_id": seeded["entity"]["id"]}, headers=tenant_b.headers)
        problem(r, 404, "entity_not_found")
        assert (await traces_of(api, tenant_a.id, marker))["memories"] == 2
