"""The memory model through REST: supersession by key and history, bi-temporal reads, the scope
chain with narrowest-wins in every direction, lifecycle, and who may write shared scopes."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from memvault.api import NamespaceAPI
from memvault.keys.schemas import KeyIn
from memvault.principal import Principal
from tests.conftest import Tenant
from tests.memories.test_router import problem

NS = "/v1/namespaces/default"
MEMORIES = f"{NS}/memories"


async def store(client: httpx.AsyncClient, tenant: Tenant, content: str, **fields: Any) -> dict[str, Any]:
    r = await client.post(MEMORIES, json={"content": content, **fields}, headers=tenant.headers)
    assert r.status_code == 201, r.text
    return r.json()


async def listing(client: httpx.AsyncClient, tenant: Tenant, **params: Any) -> list[dict[str, Any]]:
    r = await client.get(MEMORIES, params=params, headers=tenant.headers)
    assert r.status_code == 200, r.text
    return r.json()["data"]


async def search(client: httpx.AsyncClient, tenant: Tenant, query: str, **body: Any) -> list[dict[str, Any]]:
    r = await client.post(f"{NS}/search", json={"query": query, **body}, headers=tenant.headers)
    assert r.status_code == 200, r.text
    return [hit["memory"] for hit in r.json()["results"]]


def contents(memories: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in memories]


class TestSupersession:
    async def test_same_key_supersedes_and_keeps_the_old_version(self, client: httpx.AsyncClient, tenant_a: Tenant):
        old = await store(client, tenant_a, "Ana lives in Lisbon", key="home_city", user_id="ana")
        new = await store(client, tenant_a, "Ana lives in Porto", key="home_city", user_id="ana")

        assert new["id"] != old["id"]
        assert new["supersedes"] == old["id"]
        assert contents(await listing(client, tenant_a, user_id="ana")) == ["Ana lives in Porto"]

        r = await client.get(f"{MEMORIES}/{old['id']}", headers=tenant_a.headers)
        was = r.json()
        assert was["superseded_by"] == new["id"]
        assert was["superseded_at"] is not None
        assert was["valid_to"] is not None  # it stopped being true when the new one was written

    async def test_history_lists_every_version_with_actor_and_time(self, client: httpx.AsyncClient, tenant_a: Tenant):
        v1 = await store(client, tenant_a, "Deploys happen on Tuesdays", type="decision", key="deploy_day")
        v2 = await store(client, tenant_a, "Deploys happen on Thursdays", type="decision", key="deploy_day")
        r = await client.patch(f"{MEMORIES}/{v2['id']}", json={"importance": 0.9}, headers=tenant_a.headers)
        assert r.status_code == 200, r.text

        for asked in (v1["id"], v2["id"]):  # the same history from any version
            r = await client.get(f"{MEMORIES}/{asked}/history", headers=tenant_a.headers)
            assert r.status_code == 200, r.text
            h = r.json()
            assert h["current_id"] == v2["id"]
            assert [v["id"] for v in h["versions"]] == [v1["id"], v2["id"]]
            actions = [(c["memory_id"], c["action"]) for c in h["changes"]]
            assert actions == [
                (v1["id"], "created"),
                (v1["id"], "superseded"),
                (v2["id"], "created"),
                (v2["id"], "updated"),
            ]
            assert all(c["actor"].startswith("key:") for c in h["changes"])
            assert h["changes"][-1]["changed_fields"] == ["importance"]
            assert h["changes"][-1]["snapshot"]["importance"] == pytest.approx(0.9)

    async def test_restating_the_same_content_makes_no_new_version(self, client: httpx.AsyncClient, tenant_a: Tenant):
        first = await store(client, tenant_a, "Prefers tea", type="preference", key="drink", user_id="u1")
        again = await store(client, tenant_a, "prefers  TEA", type="preference", key="drink", user_id="u1")
        assert again["id"] == first["id"]
        h = (await client.get(f"{MEMORIES}/{first['id']}/history", headers=tenant_a.headers)).json()
        assert len(h["versions"]) == 1

    async def test_keys_are_per_owner_and_type(self, client: httpx.AsyncClient, tenant_a: Tenant):
        await store(client, tenant_a, "Ana drinks tea", type="preference", key="drink", user_id="ana")
        await store(client, tenant_a, "Bob drinks coffee", type="preference", key="drink", user_id="bob")
        await store(client, tenant_a, "Tea is bought on Mondays", type="fact", key="drink")
        everything = contents(await listing(client, tenant_a))
        assert sorted(everything) == ["Ana drinks tea", "Bob drinks coffee", "Tea is bought on Mondays"]

    async def test_concurrent_writers_of_one_key_leave_one_current_version(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ):
        writes = [
            client.post(MEMORIES, json={"content": f"Status is {i}", "key": "status"}, headers=tenant_a.headers)
            for i in range(6)
        ]
        responses = await asyncio.gather(*writes)
        assert [r.status_code for r in responses] == [201] * 6, [r.text for r in responses]
        current = await listing(client, tenant_a)
        assert len(current) == 1
        h = (await client.get(f"{MEMORIES}/{current[0]['id']}/history", headers=tenant_a.headers)).json()
        assert len(h["versions"]) == 6
        assert sum(v["superseded_at"] is None for v in h["versions"]) == 1

    async def test_a_superseded_version_cannot_be_edited(self, client: httpx.AsyncClient, tenant_a: Tenant):
        old = await store(client, tenant_a, "Plan A", key="plan")
        await store(client, tenant_a, "Plan B", key="plan")
        r = await client.patch(f"{MEMORIES}/{old['id']}", json={"content": "Plan C"}, headers=tenant_a.headers)
        body = problem(r, 409, "memory_superseded")
        assert body["superseded_by"]

    async def test_batch_naming_a_key_twice_keeps_the_later(self, client: httpx.AsyncClient, tenant_a: Tenant):
        r = await client.post(
            f"{MEMORIES}/batch",
            json={"memories": [{"content": "Room 101", "key": "room"}, {"content": "Room 202", "key": "room"}]},
            headers=tenant_a.headers,
        )
        assert r.status_code == 201, r.text
        first, second = r.json()["memories"]
        assert second["supersedes"] == first["id"]
        assert contents(await listing(client, tenant_a)) == ["Room 202"]


class TestBitemporal:
    async def test_knowledge_at_sees_what_we_knew_then(self, client: httpx.AsyncClient, tenant_a: Tenant):
        await store(client, tenant_a, "The launch is in May", key="launch")
        between = datetime.now(UTC)
        await asyncio.sleep(0.05)
        await store(client, tenant_a, "The launch is in June", key="launch")

        assert contents(await listing(client, tenant_a)) == ["The launch is in June"]
        then = await listing(client, tenant_a, knowledge_at=between.isoformat())
        assert contents(then) == ["The launch is in May"]
        before_anything = await listing(client, tenant_a, knowledge_at=(between - timedelta(hours=1)).isoformat())
        assert before_anything == []

        found = await search(client, tenant_a, "when is the launch", knowledge_at=between.isoformat())
        assert contents(found) == ["The launch is in May"]

    async def test_valid_at_sees_what_was_true_then(self, client: httpx.AsyncClient, tenant_a: Tenant):
        await store(
            client,
            tenant_a,
            "Ana worked at Acme",
            valid_from="2019-01-01T00:00:00Z",
            valid_to="2022-06-30T00:00:00Z",
        )
        await store(client, tenant_a, "Ana works at Globex", valid_from="2022-07-01T00:00:00Z")
        assert contents(await listing(client, tenant_a, valid_at="2020-03-01T00:00:00Z")) == ["Ana worked at Acme"]
        assert contents(await listing(client, tenant_a, valid_at="2024-01-01T00:00:00Z")) == ["Ana works at Globex"]
        found = await search(client, tenant_a, "where does Ana work", filters={"valid_at": "2020-03-01T00:00:00Z"})
        assert contents(found) == ["Ana worked at Acme"]

    async def test_superseding_with_a_valid_from_closes_the_old_valid_time(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ):
        old = await store(client, tenant_a, "Office in Berlin", key="office", valid_from="2020-01-01T00:00:00Z")
        await store(client, tenant_a, "Office in Munich", key="office", valid_from="2025-03-01T00:00:00Z")
        was = (await client.get(f"{MEMORIES}/{old['id']}", headers=tenant_a.headers)).json()
        assert was["valid_to"].startswith("2025-03-01")
        assert contents(await listing(client, tenant_a, valid_at="2024-01-01T00:00:00Z")) == []  # superseded
        past = await listing(client, tenant_a, valid_at="2024-01-01T00:00:00Z", knowledge_at=was["recorded_at"])
        assert contents(past) == ["Office in Berlin"]


class TestScopeChain:
    async def _levels(self, client: httpx.AsyncClient, tenant: Tenant, order: list[str]) -> None:
        """Store the same (type, key) at every tenant-writable level, in the given order."""
        fields = {
            "tenant": {"scope": "tenant"},
            "namespace": {"scope": "namespace"},
            "user": {"scope": "user", "user_id": "ana"},
            "session": {"scope": "session", "user_id": "ana", "session_id": "s1"},
        }
        for level in order:
            await store(client, tenant, f"Reply in {level} style", type="instruction", key="tone", **fields[level])

    @pytest.mark.parametrize(
        "order",
        [["tenant", "namespace", "user", "session"], ["session", "user", "namespace", "tenant"]],
        ids=["broad-first", "narrow-first"],
    )
    async def test_narrowest_scope_wins_whatever_the_write_order(
        self, client: httpx.AsyncClient, tenant_a: Tenant, order: list[str]
    ):
        await self._levels(client, tenant_a, order)

        async def seen(**reader: str) -> list[str]:
            return contents(await listing(client, tenant_a, type="instruction", **reader))

        assert await seen(user_id="ana", session_id="s1") == ["Reply in session style"]
        assert await seen(user_id="ana", session_id="s2") == ["Reply in user style"]
        assert await seen(user_id="ana") == ["Reply in user style"]
        assert await seen(user_id="bob") == ["Reply in namespace style"]
        found = await search(client, tenant_a, "what style to reply in", filters={"user_id": "ana", "session_id": "s1"})
        assert contents(found) == ["Reply in session style"]

    async def test_tenant_scope_reaches_every_namespace_and_namespaces_override_it(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ):
        r = await client.post("/v1/namespaces", json={"name": "support"}, headers=tenant_a.headers)
        assert r.status_code == 201, r.text
        shared = await store(client, tenant_a, "Company timezone is CET", scope="tenant", key="tz")
        assert shared["namespace"] is None and shared["scope"] == "tenant"

        r = await client.get("/v1/namespaces/support/memories", headers=tenant_a.headers)
        assert contents(r.json()["data"]) == ["Company timezone is CET"]

        r = await client.post(
            "/v1/namespaces/support/memories",
            json={"content": "Support works in UTC", "key": "tz"},
            headers=tenant_a.headers,
        )
        assert r.status_code == 201, r.text
        r = await client.get("/v1/namespaces/support/memories", headers=tenant_a.headers)
        assert contents(r.json()["data"]) == ["Support works in UTC"]
        assert contents(await listing(client, tenant_a)) == ["Company timezone is CET"]  # default unaffected

    async def test_other_users_and_sessions_stay_private(self, client: httpx.AsyncClient, tenant_a: Tenant):
        await store(client, tenant_a, "Ana is allergic to peanuts", user_id="ana")
        await store(client, tenant_a, "Session note: the user is on mobile", session_id="s9")
        await store(client, tenant_a, "The team ships on Fridays")
        assert contents(await listing(client, tenant_a, user_id="bob")) == ["The team ships on Fridays"]
        found = await search(client, tenant_a, "peanut allergy", filters={"user_id": "bob"})
        assert "Ana is allergic to peanuts" not in contents(found)
        found = await search(client, tenant_a, "peanut allergy", filters={"user_id": "ana"})
        assert contents(found)[0] == "Ana is allergic to peanuts"
        assert len(await listing(client, tenant_a)) == 3  # browsing the namespace shows all

    async def test_scope_needs_its_owner(self, client: httpx.AsyncClient, tenant_a: Tenant):
        r = await client.post(MEMORIES, json={"content": "x", "scope": "user"}, headers=tenant_a.headers)
        problem(r, 422, "validation_error")
        r = await client.post(MEMORIES, json={"content": "x", "scope": "session"}, headers=tenant_a.headers)
        problem(r, 422, "validation_error")
        m = await store(client, tenant_a, "Ana likes jazz", user_id="ana")
        assert m["scope"] == "user"
        r = await client.patch(f"{MEMORIES}/{m['id']}", json={"user_id": None}, headers=tenant_a.headers)
        problem(r, 422, "validation_error")


class TestSharedScopeRights:
    async def test_limited_or_non_admin_keys_cannot_write_tenant_scope(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ):
        for body in (
            {"name": "w", "scopes": ["read", "write"]},
            {"name": "l", "scopes": ["admin"], "namespaces": ["default"]},
        ):
            r = await client.post("/v1/keys", json=body, headers=tenant_a.headers)
            assert r.status_code == 201, r.text
            headers = {"Authorization": f"Bearer {r.json()['key']}"}
            r = await client.post(MEMORIES, json={"content": "x", "scope": "tenant"}, headers=headers)
            problem(r, 403, "forbidden")

    async def test_only_operators_write_system_scope_and_every_tenant_reads_it(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
    ):
        r = await client.post(MEMORIES, json={"content": "x", "scope": "system"}, headers=tenant_a.headers)
        problem(r, 403, "forbidden")
        # Only the CLI mints operator keys; REST refuses the scope.
        r = await client.post("/v1/keys", json={"scopes": ["operator"]}, headers=tenant_a.headers)
        problem(r, 422, "validation_error")

        cli = Principal.system(tenant_a.id, subject="cli", operator=True)
        op_key = await api.create_key(cli, KeyIn(name="ops", scopes=["admin"]), operator=True)
        assert "operator" in op_key.scopes
        ops = {"Authorization": f"Bearer {op_key.key}"}
        marker = uuid.uuid4().hex[:8]
        r = await client.post(
            MEMORIES,
            json={"content": f"Never promise delivery dates {marker}", "scope": "system", "type": "instruction"},
            headers=ops,
        )
        assert r.status_code == 201, r.text
        sys_mem = r.json()
        try:
            for t in (tenant_a, tenant_b):
                seen = await listing(client, t, scope="system")
                assert f"Never promise delivery dates {marker}" in contents(seen)
                r = await client.get(f"{MEMORIES}/{sys_mem['id']}", headers=t.headers)
                assert r.status_code == 200
                # And every tenant's search finds it, by meaning and by its words.
                r = await client.post(f"{NS}/search", json={"query": f"delivery dates {marker}"}, headers=t.headers)
                hit = next(h for h in r.json()["results"] if h["memory"]["id"] == sys_mem["id"])
                assert hit["signals"]["dense_rank"] is not None and hit["signals"]["lexical_rank"] is not None
            # Tenants read it but cannot change or delete it.
            r = await client.delete(f"{MEMORIES}/{sys_mem['id']}", headers=tenant_b.headers)
            problem(r, 403, "forbidden")
            r = await client.post(f"{MEMORIES}/{sys_mem['id']}/archive", headers=tenant_b.headers)
            problem(r, 403, "forbidden")
        finally:
            r = await client.delete(f"{MEMORIES}/{sys_mem['id']}", headers=ops)
            assert r.status_code == 204, r.text
        r = await client.get(f"{MEMORIES}/{sys_mem['id']}", headers=tenant_b.headers)
        problem(r, 404, "memory_not_found")


class TestLifecycle:
    async def test_promote_and_archive(self, client: httpx.AsyncClient, tenant_a: Tenant):
        m = await store(client, tenant_a, "Maybe the user likes sushi", state="tentative", type="preference")
        r = await client.post(f"{MEMORIES}/{m['id']}/promote", headers=tenant_a.headers)
        assert r.status_code == 200 and r.json()["state"] == "stable"

        r = await client.post(f"{MEMORIES}/{m['id']}/archive", headers=tenant_a.headers)
        assert r.status_code == 200 and r.json()["state"] == "archived"
        assert await listing(client, tenant_a) == []
        assert await search(client, tenant_a, "sushi") == []
        assert contents(await listing(client, tenant_a, include_archived="true")) == ["Maybe the user likes sushi"]
        found = await search(client, tenant_a, "sushi", filters={"include_archived": True})
        assert contents(found) == ["Maybe the user likes sushi"]

        h = (await client.get(f"{MEMORIES}/{m['id']}/history", headers=tenant_a.headers)).json()
        assert [c["action"] for c in h["changes"]] == ["created", "promoted", "archived"]

    async def test_an_archived_override_no_longer_hides_the_default(self, client: httpx.AsyncClient, tenant_a: Tenant):
        await store(client, tenant_a, "Use metric units", type="instruction", key="units")
        mine = await store(client, tenant_a, "Use imperial units", type="instruction", key="units", user_id="ana")
        assert contents(await listing(client, tenant_a, user_id="ana")) == ["Use imperial units"]
        await client.post(f"{MEMORIES}/{mine['id']}/archive", headers=tenant_a.headers)
        assert contents(await listing(client, tenant_a, user_id="ana")) == ["Use metric units"]


class TestHardDelete:
    async def test_delete_removes_every_version_and_its_history(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ):
        v1 = await store(client, tenant_a, "Secret project codename is Falcon", key="codename")
        v2 = await store(client, tenant_a, "Project codename is Osprey", key="codename")
        r = await client.delete(f"{MEMORIES}/{v2['id']}", headers=tenant_a.headers)
        assert r.status_code == 204
        async with api._db.owner() as s:
            ids = [uuid.UUID(v1["id"]), uuid.UUID(v2["id"])]
            left = await s.scalar(text("SELECT count(*) FROM memories WHERE id = ANY(:ids)"), {"ids": ids})
            hist = await s.scalar(text("SELECT count(*) FROM memory_history WHERE memory_id = ANY(:ids)"), {"ids": ids})
            audit = (
                await s.execute(
                    text(
                        "SELECT action, detail::text FROM audit_log WHERE tenant_id = :t AND target_id = :m ORDER BY id"
                    ),
                    {"t": tenant_a.id, "m": v2["id"]},
                )
            ).all()
        assert (left, hist) == (0, 0)
        assert [a for a, _ in audit] == ["memory.create", "memory.delete"]
        assert all("Falcon" not in d and "Osprey" not in d for _, d in audit)

    async def test_merged_duplicates_go_with_their_representative_but_not_the_reverse(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ):
        rep = await store(client, tenant_a, "Ana's cat is called Miso")
        dup = await store(client, tenant_a, "Ana's cat is named Miso")
        other = await store(client, tenant_a, "Ana's cat is called Tofu")
        async with api._db.owner() as s:  # what a dedup merge leaves: the duplicate points at its representative
            await s.execute(
                text("UPDATE memories SET superseded_at = now(), superseded_by = :r WHERE id IN (:d, :o)"),
                {"r": uuid.UUID(rep["id"]), "d": uuid.UUID(dup["id"]), "o": uuid.UUID(other["id"])},
            )
        r = await client.delete(f"{MEMORIES}/{dup['id']}", headers=tenant_a.headers)
        assert r.status_code == 204
        assert (await client.get(f"{MEMORIES}/{rep['id']}", headers=tenant_a.headers)).status_code == 200
        r = await client.delete(f"{MEMORIES}/{rep['id']}", headers=tenant_a.headers)
        assert r.status_code == 204
        r = await client.get(f"{MEMORIES}/{other['id']}", headers=tenant_a.headers)
        problem(r, 404, "memory_not_found")


class TestOtherTenant:
    async def test_other_tenant_sees_nothing(self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant):
        m = await store(client, tenant_a, "A's tenant-wide rule", scope="tenant", key="rule")
        n = await store(client, tenant_a, "A's note", key="note")
        for mid in (m["id"], n["id"]):
            for method, path in (
                ("GET", f"{MEMORIES}/{mid}"),
                ("GET", f"{MEMORIES}/{mid}/history"),
                ("POST", f"{MEMORIES}/{mid}/promote"),
                ("POST", f"{MEMORIES}/{mid}/archive"),
                ("DELETE", f"{MEMORIES}/{mid}"),
            ):
                r = await client.request(method, path, headers=tenant_b.headers)
                problem(r, 404, "memory_not_found")
        assert await listing(client, tenant_b, scope="tenant") == []
        assert await search(client, tenant_b, "tenant-wide rule") == []
        # A's memories are untouched.
        assert sorted(contents(await listing(client, tenant_a))) == ["A's note", "A's tenant-wide rule"]

    async def test_history_of_unknown_id_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant):
        r = await client.get(f"{MEMORIES}/{uuid.uuid4()}/history", headers=tenant_a.headers)
        problem(r, 404, "memory_not_found")
