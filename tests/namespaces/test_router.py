"""Namespaces over REST: create, list, get, delete, and the memories that live and die with them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
import psycopg
import pytest

from memvault.db.urls import DatabaseUrls
from tests.conftest import Tenant


def unique_name(label: str = "ns") -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}"


async def create_namespace(
    client: httpx.AsyncClient, tenant: Tenant, name: str, description: str | None = None
) -> httpx.Response:
    r = await client.post("/v1/namespaces", json={"name": name, "description": description}, headers=tenant.headers)
    assert r.status_code == 201, r.text
    return r


async def store(client: httpx.AsyncClient, tenant: Tenant, ns: str, *contents: str) -> list[str]:
    r = await client.post(
        f"/v1/namespaces/{ns}/memories/batch",
        json={"memories": [{"content": c} for c in contents]},
        headers=tenant.headers,
    )
    assert r.status_code == 201, r.text
    return [m["id"] for m in r.json()["memories"]]


async def names(client: httpx.AsyncClient, tenant: Tenant) -> list[str]:
    r = await client.get("/v1/namespaces", headers=tenant.headers)
    assert r.status_code == 200, r.text
    return [n["name"] for n in r.json()]


class TestCreateNamespace:
    async def test_returns_it_empty(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        name = unique_name()
        before = datetime.now(UTC)

        r = await create_namespace(client, tenant_a, name, "Notes about travel")

        body = r.json()
        assert body["name"] == name
        assert body["description"] == "Notes about travel"
        assert body["memory_count"] == 0
        uuid.UUID(body["id"])
        assert abs(datetime.fromisoformat(body["created_at"]) - before) < timedelta(seconds=30)

    async def test_is_usable_at_once(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        name = unique_name()
        await create_namespace(client, tenant_a, name)

        [memory_id] = await store(client, tenant_a, name, "The user is vegetarian")

        r = await client.get(f"/v1/namespaces/{name}/memories/{memory_id}", headers=tenant_a.headers)
        assert r.status_code == 200, r.text
        assert r.json()["namespace"] == name

    @pytest.mark.parametrize(
        "name", ["a", "Team.Alpha_1", "x" * 63, "0-start-with-digit"], ids=["one", "mixed", "longest", "digit"]
    )
    async def test_accepts_url_safe_names(self, client: httpx.AsyncClient, tenant_a: Tenant, name: str) -> None:
        r = await client.post("/v1/namespaces", json={"name": name}, headers=tenant_a.headers)

        assert r.status_code == 201, r.text
        assert (await client.get(f"/v1/namespaces/{name}", headers=tenant_a.headers)).status_code == 200


class TestDuplicateName:
    async def test_is_409(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        name = unique_name()
        await create_namespace(client, tenant_a, name, "first")

        r = await client.post("/v1/namespaces", json={"name": name, "description": "second"}, headers=tenant_a.headers)

        assert r.status_code == 409, r.text
        assert r.json()["code"] == "namespace_exists"

    async def test_keeps_the_original(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        name = unique_name()
        await create_namespace(client, tenant_a, name, "first")
        [memory_id] = await store(client, tenant_a, name, "The user's sister is Ana")

        await client.post("/v1/namespaces", json={"name": name, "description": "second"}, headers=tenant_a.headers)

        r = await client.get(f"/v1/namespaces/{name}", headers=tenant_a.headers)
        assert r.json()["description"] == "first"
        assert r.json()["memory_count"] == 1
        assert (await names(client, tenant_a)).count(name) == 1
        got = await client.get(f"/v1/namespaces/{name}/memories/{memory_id}", headers=tenant_a.headers)
        assert got.status_code == 200

    async def test_default_namespace_too(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post("/v1/namespaces", json={"name": "default"}, headers=tenant_a.headers)

        assert r.status_code == 409, r.text
        assert r.json()["code"] == "namespace_exists"

    async def test_names_are_per_tenant(self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant) -> None:
        name = unique_name()
        await create_namespace(client, tenant_a, name)

        r = await client.post("/v1/namespaces", json={"name": name}, headers=tenant_b.headers)

        assert r.status_code == 201, r.text
        assert name in await names(client, tenant_b)


BAD_NAMES = {
    "empty": "",
    "space": "has space",
    "slash": "a/b",
    "leading-dash": "-lead",
    "leading-dot": ".hidden",
    "too-long": "x" * 64,
    "non-ascii": "café",
    "percent": "50%",
}


class TestBadNames:
    @pytest.mark.parametrize("name", BAD_NAMES.values(), ids=BAD_NAMES.keys())
    async def test_create_is_422(self, client: httpx.AsyncClient, tenant_a: Tenant, name: str) -> None:
        r = await client.post("/v1/namespaces", json={"name": name}, headers=tenant_a.headers)

        assert r.status_code == 422, r.text
        assert r.json()["code"] == "validation_error"
        assert r.json()["field"] == "name"
        assert await names(client, tenant_a) == ["default"]

    @pytest.mark.parametrize("body", [{}, {"name": None}, {"name": 7}, {"name": "ok", "color": "red"}])
    async def test_malformed_body_is_422(self, client: httpx.AsyncClient, tenant_a: Tenant, body: dict) -> None:
        r = await client.post("/v1/namespaces", json=body, headers=tenant_a.headers)

        assert r.status_code == 422, r.text
        assert r.json()["code"] == "validation_error"

    async def test_too_long_description_is_422(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post(
            "/v1/namespaces", json={"name": unique_name(), "description": "x" * 2001}, headers=tenant_a.headers
        )

        assert r.status_code == 422, r.text
        assert r.json()["field"] == "description"

    @pytest.mark.parametrize("name", ["-lead", "x" * 64, "has space"], ids=["leading-dash", "too-long", "space"])
    async def test_bad_name_in_path_is_422(self, client: httpx.AsyncClient, tenant_a: Tenant, name: str) -> None:
        r = await client.get(f"/v1/namespaces/{name}", headers=tenant_a.headers)

        assert r.status_code == 422, r.text
        assert r.json()["code"] == "validation_error"


class TestListNamespaces:
    async def test_sorted_by_name_with_counts(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await create_namespace(client, tenant_a, "zeta")
        await create_namespace(client, tenant_a, "alpha")
        await store(client, tenant_a, "zeta", "The user likes jazz", "The user plays piano")
        await store(client, tenant_a, "default", "The user lives in Porto")

        r = await client.get("/v1/namespaces", headers=tenant_a.headers)

        assert [(n["name"], n["memory_count"]) for n in r.json()] == [("alpha", 0), ("default", 1), ("zeta", 2)]

    async def test_other_tenant_sees_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        await create_namespace(client, tenant_a, "a-private")
        await store(client, tenant_a, "default", "The user is allergic to peanuts")

        r = await client.get("/v1/namespaces", headers=tenant_b.headers)

        assert [(n["name"], n["memory_count"]) for n in r.json()] == [("default", 0)]


class TestGetNamespace:
    async def test_returns_it_with_its_memory_count(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        name = unique_name()
        created = (await create_namespace(client, tenant_a, name, "Work")).json()
        await store(client, tenant_a, name, "Standup is at 9:30", "The team uses Linear", "Deploys happen on Tuesday")

        r = await client.get(f"/v1/namespaces/{name}", headers=tenant_a.headers)

        assert r.status_code == 200, r.text
        assert r.json() == {**created, "memory_count": 3}

    async def test_count_follows_deletes(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        first, _ = await store(client, tenant_a, "default", "The user runs marathons", "The user owns a bike")

        r = await client.delete(f"/v1/namespaces/default/memories/{first}", headers=tenant_a.headers)
        assert r.status_code == 204, r.text

        r = await client.get("/v1/namespaces/default", headers=tenant_a.headers)
        assert r.json()["memory_count"] == 1

    async def test_unknown_name_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.get(f"/v1/namespaces/{unique_name()}", headers=tenant_a.headers)

        assert r.status_code == 404, r.text
        assert r.json()["code"] == "namespace_not_found"

    async def test_other_tenant_sees_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        name = unique_name()
        await create_namespace(client, tenant_a, name)

        r = await client.get(f"/v1/namespaces/{name}", headers=tenant_b.headers)

        assert r.status_code == 404, r.text
        assert r.json()["code"] == "namespace_not_found"


class TestUpdateNamespace:
    async def test_sets_description_and_settings(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        name = unique_name()
        await create_namespace(client, tenant_a, name, "Old")

        r = await client.patch(
            f"/v1/namespaces/{name}",
            json={
                "description": "New",
                "settings": {
                    "search": {"weights": {"lexical": 2}, "fusion": "weighted"},
                    "maintenance": {"jobs": ["dedup", "decay"], "every_minutes": 60},
                },
            },
            headers=tenant_a.headers,
        )

        assert r.status_code == 200, r.text
        body = r.json()
        assert body["description"] == "New"
        assert body["settings"]["search"] == {
            "weights": {"lexical": 2.0},
            "fusion": "weighted",
            "session_gap_minutes": None,
        }
        assert body["settings"]["maintenance"] == {"jobs": ["dedup", "decay"], "every_minutes": 60, "budget_ms": 60000}
        # And it was stored, not only echoed.
        again = (await client.get(f"/v1/namespaces/{name}", headers=tenant_a.headers)).json()
        assert again["settings"] == body["settings"]
        assert again["description"] == "New"

    async def test_a_part_given_replaces_only_that_part_and_null_clears_it(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        name = unique_name()
        await create_namespace(client, tenant_a, name, "Kept")
        settings = {"search": {"weights": {"dense": 3}}, "maintenance": {"every_minutes": 30}}
        r = await client.patch(f"/v1/namespaces/{name}", json={"settings": settings}, headers=tenant_a.headers)
        assert r.status_code == 200, r.text

        r = await client.patch(
            f"/v1/namespaces/{name}",
            json={"settings": {"search": {"fusion": "weighted"}, "maintenance": None}},
            headers=tenant_a.headers,
        )

        assert r.status_code == 200, r.text
        body = r.json()
        assert body["description"] == "Kept"
        search = {"weights": None, "fusion": "weighted", "session_gap_minutes": None}
        assert body["settings"] == {"search": search, "maintenance": None}

    @pytest.mark.parametrize(
        "bad",
        [
            {"search": {"weights": {"nonsense": 1}}},
            {"search": {"weights": {"dense": 11}}},
            {"search": {"fusion": "max"}},
            {"maintenance": {"jobs": ["dedup", "dedup"]}},
            {"maintenance": {"every_minutes": 1}},
            {"other": {}},
        ],
    )
    async def test_bad_settings_are_422_and_change_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, bad: dict[str, object]
    ) -> None:
        name = unique_name()
        await create_namespace(client, tenant_a, name, "Same")

        r = await client.patch(f"/v1/namespaces/{name}", json={"settings": bad}, headers=tenant_a.headers)

        assert r.status_code == 422, r.text
        again = (await client.get(f"/v1/namespaces/{name}", headers=tenant_a.headers)).json()
        assert again["settings"] == {"search": None, "maintenance": None}

    async def test_other_tenant_cannot_change_it(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        name = unique_name()
        await create_namespace(client, tenant_a, name, "Mine")

        r = await client.patch(f"/v1/namespaces/{name}", json={"description": "Theirs"}, headers=tenant_b.headers)

        assert r.status_code == 404, r.text
        again = (await client.get(f"/v1/namespaces/{name}", headers=tenant_a.headers)).json()
        assert again["description"] == "Mine"


async def memory_rows(owner_url: str, ids: list[str]) -> int:
    """Rows left in the table, counted as the owner so that nothing (RLS, a new namespace id) hides them."""
    async with await psycopg.AsyncConnection.connect(owner_url) as conn:
        cur = await conn.execute("SELECT count(*) FROM memories WHERE id = ANY(%s::uuid[])", (ids,))
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


class TestDeleteNamespace:
    @pytest.fixture
    def owner_url(self, pg_urls: DatabaseUrls) -> str:
        return pg_urls.owner.render_as_string(hide_password=False).replace("+psycopg", "")

    async def test_is_gone(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        name = unique_name()
        await create_namespace(client, tenant_a, name)

        r = await client.delete(f"/v1/namespaces/{name}", headers=tenant_a.headers)

        assert r.status_code == 204, r.text
        assert r.content == b""
        got = await client.get(f"/v1/namespaces/{name}", headers=tenant_a.headers)
        assert got.status_code == 404
        assert got.json()["code"] == "namespace_not_found"
        assert name not in await names(client, tenant_a)

    async def test_deletes_its_memories(self, client: httpx.AsyncClient, tenant_a: Tenant, owner_url: str) -> None:
        name = unique_name()
        await create_namespace(client, tenant_a, name)
        ids = await store(client, tenant_a, name, "The user's passport expires in May", "The user flies with TAP")

        await client.delete(f"/v1/namespaces/{name}", headers=tenant_a.headers)

        assert await memory_rows(owner_url, ids) == 0

    async def test_recreated_namespace_is_empty(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        name = unique_name()
        await create_namespace(client, tenant_a, name)
        ids = await store(client, tenant_a, name, "The user's passport expires in May", "The user flies with TAP")
        await client.delete(f"/v1/namespaces/{name}", headers=tenant_a.headers)

        r = await create_namespace(client, tenant_a, name)

        assert r.json()["memory_count"] == 0
        listed = await client.get(f"/v1/namespaces/{name}/memories", headers=tenant_a.headers)
        assert listed.json()["data"] == []
        found = await client.post(f"/v1/namespaces/{name}/search", json={"query": "passport"}, headers=tenant_a.headers)
        assert found.json()["results"] == []
        for memory_id in ids:
            got = await client.get(f"/v1/namespaces/{name}/memories/{memory_id}", headers=tenant_a.headers)
            assert got.status_code == 404
            assert got.json()["code"] == "memory_not_found"

    async def test_leaves_other_namespaces_alone(
        self, client: httpx.AsyncClient, tenant_a: Tenant, owner_url: str
    ) -> None:
        name = unique_name()
        await create_namespace(client, tenant_a, name)
        await store(client, tenant_a, name, "Doomed memory")
        kept = await store(client, tenant_a, "default", "The user's dog is Rex")

        await client.delete(f"/v1/namespaces/{name}", headers=tenant_a.headers)

        assert await memory_rows(owner_url, kept) == 1
        assert (await client.get("/v1/namespaces/default", headers=tenant_a.headers)).json()["memory_count"] == 1

    async def test_unknown_name_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.delete(f"/v1/namespaces/{unique_name()}", headers=tenant_a.headers)

        assert r.status_code == 404, r.text
        assert r.json()["code"] == "namespace_not_found"

    async def test_memory_routes_then_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        name = unique_name()
        await create_namespace(client, tenant_a, name)
        await client.delete(f"/v1/namespaces/{name}", headers=tenant_a.headers)

        r = await client.post(f"/v1/namespaces/{name}/memories", json={"content": "x"}, headers=tenant_a.headers)

        assert r.status_code == 404, r.text
        assert r.json()["code"] == "namespace_not_found"
