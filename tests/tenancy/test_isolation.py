"""Two tenants, each with a valid admin key and a namespace called `default`: neither can reach the
other's memories, namespaces or keys, and a foreign id is answered exactly like an id that does not exist."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from memvault.api import NamespaceAPI
from memvault.memories.schemas import MemoryIn
from memvault.namespaces.schemas import NamespaceIn
from tests.conftest import Tenant

A_FACTS = [
    "The user's bank PIN hint is their first dog's name",
    "The user is planning a surprise party for Marta on June 3rd",
]
B_FACTS = ["The user collects vintage fountain pens"]


@pytest.fixture
async def a_memories(api: NamespaceAPI, tenant_a: Tenant) -> list[str]:
    created = await api.store_many(tenant_a.principal, "default", [MemoryIn(content=c) for c in A_FACTS])
    return [str(m.id) for m in created]


@pytest.fixture
async def b_memories(api: NamespaceAPI, tenant_b: Tenant) -> list[str]:
    created = await api.store_many(tenant_b.principal, "default", [MemoryIn(content=c) for c in B_FACTS])
    return [str(m.id) for m in created]


def comparable(r: httpx.Response, memory_id: str) -> tuple[int, str, dict[str, Any]]:
    """The response minus what legitimately differs between two requests: the id asked for and the request id."""
    body = r.json()
    body.pop("request_id", None)
    body["detail"] = body["detail"].replace(memory_id, "<id>")
    return r.status_code, r.headers["content-type"], body


MEMORY_CALLS: list[tuple[str, dict[str, Any] | None]] = [
    ("GET", None),
    ("PATCH", {"content": "The user has no secrets"}),
    ("DELETE", None),
]


class TestForeignMemoryIds:
    @pytest.mark.parametrize(("method", "body"), MEMORY_CALLS, ids=[m for m, _ in MEMORY_CALLS])
    async def test_are_404_memory_not_found(
        self,
        client: httpx.AsyncClient,
        tenant_b: Tenant,
        a_memories: list[str],
        method: str,
        body: dict[str, Any] | None,
    ) -> None:
        r = await client.request(
            method, f"/v1/namespaces/default/memories/{a_memories[0]}", json=body, headers=tenant_b.headers
        )

        assert r.status_code == 404, r.text
        assert r.json()["code"] == "memory_not_found"

    @pytest.mark.parametrize(("method", "body"), MEMORY_CALLS, ids=[m for m, _ in MEMORY_CALLS])
    async def test_answer_equals_that_for_an_id_that_does_not_exist(
        self,
        client: httpx.AsyncClient,
        tenant_b: Tenant,
        a_memories: list[str],
        method: str,
        body: dict[str, Any] | None,
    ) -> None:
        missing = str(uuid.uuid4())

        foreign = await client.request(
            method, f"/v1/namespaces/default/memories/{a_memories[0]}", json=body, headers=tenant_b.headers
        )
        absent = await client.request(
            method, f"/v1/namespaces/default/memories/{missing}", json=body, headers=tenant_b.headers
        )

        assert comparable(foreign, a_memories[0]) == comparable(absent, missing)

    async def test_owner_still_has_them_unchanged(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant, a_memories: list[str]
    ) -> None:
        for memory_id in a_memories:
            for method, body in MEMORY_CALLS:
                await client.request(
                    method, f"/v1/namespaces/default/memories/{memory_id}", json=body, headers=tenant_b.headers
                )

        # Listing does not count as an access, so it shows whether B's GETs were counted.
        r = await client.get("/v1/namespaces/default/memories", headers=tenant_a.headers)
        assert r.status_code == 200, r.text
        listed = {m["id"]: m for m in r.json()["data"]}
        assert sorted(listed) == sorted(a_memories)
        for memory_id, content in zip(a_memories, A_FACTS, strict=True):
            assert listed[memory_id]["content"] == content
            assert listed[memory_id]["access_count"] == 0


class TestListAndSearch:
    async def test_list_shows_only_own_memories(
        self, client: httpx.AsyncClient, tenant_b: Tenant, a_memories: list[str], b_memories: list[str]
    ) -> None:
        r = await client.get("/v1/namespaces/default/memories", params={"limit": 200}, headers=tenant_b.headers)

        assert r.status_code == 200, r.text
        assert [m["id"] for m in r.json()["data"]] == b_memories

    async def test_list_with_filters_shows_only_own_memories(
        self, client: httpx.AsyncClient, tenant_b: Tenant, a_memories: list[str], b_memories: list[str]
    ) -> None:
        r = await client.get(
            "/v1/namespaces/default/memories",
            params={"type": "fact", "state": ["tentative", "stable", "archived"], "metadata": "{}"},
            headers=tenant_b.headers,
        )

        assert r.status_code == 200, r.text
        assert [m["id"] for m in r.json()["data"]] == b_memories

    async def test_search_for_the_other_tenants_words_finds_nothing_of_theirs(
        self, client: httpx.AsyncClient, tenant_b: Tenant, a_memories: list[str], b_memories: list[str]
    ) -> None:
        for query in [*A_FACTS, "surprise party Marta", "bank PIN"]:
            r = await client.post(
                "/v1/namespaces/default/search", json={"query": query, "limit": 100}, headers=tenant_b.headers
            )

            assert r.status_code == 200, r.text
            found = {res["memory"]["id"] for res in r.json()["results"]}
            assert found <= set(b_memories), query

    async def test_search_with_no_memories_of_ones_own_is_empty(
        self, client: httpx.AsyncClient, tenant_b: Tenant, a_memories: list[str]
    ) -> None:
        r = await client.post("/v1/namespaces/default/search", json={"query": A_FACTS[1]}, headers=tenant_b.headers)

        assert r.status_code == 200, r.text
        assert r.json()["results"] == []

    async def test_counts_are_own_only(
        self, client: httpx.AsyncClient, tenant_b: Tenant, a_memories: list[str], b_memories: list[str]
    ) -> None:
        listed = await client.get("/v1/namespaces", headers=tenant_b.headers)
        one = await client.get("/v1/namespaces/default", headers=tenant_b.headers)

        assert [(n["name"], n["memory_count"]) for n in listed.json()] == [("default", len(b_memories))]
        assert one.json()["memory_count"] == len(b_memories)


# Every route under a namespace, as B would call it with A's namespace name.
NAMESPACED_CALLS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/v1/namespaces/{ns}", None),
    ("DELETE", "/v1/namespaces/{ns}", None),
    ("GET", "/v1/namespaces/{ns}/memories", None),
    ("POST", "/v1/namespaces/{ns}/memories", {"content": "planted by B"}),
    ("POST", "/v1/namespaces/{ns}/memories/batch", {"memories": [{"content": "planted by B"}]}),
    ("GET", "/v1/namespaces/{ns}/memories/{memory_id}", None),
    ("PATCH", "/v1/namespaces/{ns}/memories/{memory_id}", {"content": "changed by B"}),
    ("DELETE", "/v1/namespaces/{ns}/memories/{memory_id}", None),
    ("POST", "/v1/namespaces/{ns}/search", {"query": "salary"}),
]


class TestForeignNamespaces:
    @pytest.fixture
    async def a_only(self, api: NamespaceAPI, tenant_a: Tenant) -> tuple[str, str]:
        """A namespace of A whose name B lacks, with one memory in it: (name, memory id)."""
        name = f"a-only-{uuid.uuid4().hex[:8]}"
        await api.create_namespace(tenant_a.principal, NamespaceIn(name=name))
        memory = await api.store(tenant_a.principal, name, MemoryIn(content="The user's salary is 90k"))
        return name, str(memory.id)

    @pytest.mark.parametrize(
        ("method", "path", "body"), NAMESPACED_CALLS, ids=[f"{m} {p}" for m, p, _ in NAMESPACED_CALLS]
    )
    async def test_are_404_namespace_not_found_like_a_name_that_does_not_exist(
        self,
        client: httpx.AsyncClient,
        tenant_b: Tenant,
        a_only: tuple[str, str],
        method: str,
        path: str,
        body: dict[str, Any] | None,
    ) -> None:
        name, memory_id = a_only
        missing = f"a-only-{uuid.uuid4().hex[:8]}"

        foreign = await client.request(
            method, path.format(ns=name, memory_id=memory_id), json=body, headers=tenant_b.headers
        )
        absent = await client.request(
            method, path.format(ns=missing, memory_id=memory_id), json=body, headers=tenant_b.headers
        )

        assert foreign.status_code == 404, foreign.text
        assert foreign.json()["code"] == "namespace_not_found"
        assert comparable(foreign, name) == comparable(absent, missing)

    async def test_owner_still_has_it(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant, a_only: tuple[str, str]
    ) -> None:
        name, memory_id = a_only
        await client.delete(f"/v1/namespaces/{name}", headers=tenant_b.headers)
        await client.delete(f"/v1/namespaces/{name}/memories/{memory_id}", headers=tenant_b.headers)

        r = await client.get(f"/v1/namespaces/{name}/memories/{memory_id}", headers=tenant_a.headers)

        assert r.status_code == 200, r.text
        assert r.json()["content"] == "The user's salary is 90k"

    async def test_same_name_in_another_tenant_is_a_different_namespace(
        self, client: httpx.AsyncClient, tenant_b: Tenant, a_only: tuple[str, str]
    ) -> None:
        name, memory_id = a_only

        created = await client.post("/v1/namespaces", json={"name": name}, headers=tenant_b.headers)

        assert created.status_code == 201, created.text
        assert created.json()["memory_count"] == 0
        listed = await client.get(f"/v1/namespaces/{name}/memories", headers=tenant_b.headers)
        assert listed.json()["data"] == []
        got = await client.get(f"/v1/namespaces/{name}/memories/{memory_id}", headers=tenant_b.headers)
        assert got.status_code == 404
        assert got.json()["code"] == "memory_not_found"

    async def test_deleting_ones_own_default_leaves_the_others(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant, a_memories: list[str]
    ) -> None:
        r = await client.delete("/v1/namespaces/default", headers=tenant_b.headers)
        assert r.status_code == 204, r.text

        r = await client.get("/v1/namespaces/default", headers=tenant_a.headers)
        assert r.json()["memory_count"] == len(a_memories)


async def key_ids(client: httpx.AsyncClient, tenant: Tenant) -> list[str]:
    r = await client.get("/v1/keys", headers=tenant.headers)
    assert r.status_code == 200, r.text
    return [k["id"] for k in r.json()["data"]]


class TestForeignKeys:
    async def test_cannot_revoke_the_others_key(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        [a_key] = await key_ids(client, tenant_a)
        missing = str(uuid.uuid4())

        foreign = await client.delete(f"/v1/keys/{a_key}", headers=tenant_b.headers)
        absent = await client.delete(f"/v1/keys/{missing}", headers=tenant_b.headers)

        assert foreign.status_code == 404, foreign.text
        assert foreign.json()["code"] == "api_key_not_found"
        assert comparable(foreign, a_key) == comparable(absent, missing)
        assert (await client.get("/v1/namespaces", headers=tenant_a.headers)).status_code == 200
        keys = (await client.get("/v1/keys", headers=tenant_a.headers)).json()["data"]
        assert keys[0]["revoked_at"] is None

    async def test_key_list_shows_only_own_keys(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        extra = await client.post("/v1/keys", json={"name": "a's bot"}, headers=tenant_a.headers)
        assert extra.status_code == 201, extra.text
        a_keys = (await client.get("/v1/keys", headers=tenant_a.headers)).json()["data"]

        r = await client.get("/v1/keys", headers=tenant_b.headers)

        assert len(r.json()["data"]) == 1
        for k in a_keys:
            assert k["id"] not in r.text
            assert k["prefix"] not in r.text

    async def test_a_key_authenticates_only_into_its_own_tenant(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        r = await client.get("/v1/status", headers=tenant_b.headers)

        assert r.status_code == 200, r.text
        assert r.json()["principal"]["tenant_id"] == str(tenant_b.id)
