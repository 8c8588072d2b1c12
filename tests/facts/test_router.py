"""Preferences and facts over REST: keyed memories superseded by a later one about the same
thing, validity times, relations between known entities, bad input and tenant isolation."""

from __future__ import annotations

import httpx

from tests.conftest import Tenant
from tests.memories.test_router import problem

NS = "/v1/namespaces/default"


class TestPreferences:
    async def test_stored_then_superseded_with_history(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        body = {"category": "Editor", "preference": "vim keybindings", "session_id": "s1", "confidence": 0.7}
        r = await client.post(f"{NS}/preferences", json=body, headers=tenant_a.headers)
        assert r.status_code == 201, r.text
        first = r.json()
        assert first["type"] == "preference" and first["key"] == "preference:editor"
        assert first["scope"] == "session" and first["confidence"] == 0.7
        assert first["metadata"] == {"category": "Editor", "preference": "vim keybindings"}

        r = await client.post(
            f"{NS}/preferences",
            json={"category": "editor", "preference": "emacs", "session_id": "s1"},
            headers=tenant_a.headers,
        )
        second = r.json()

        assert r.status_code == 201 and second["supersedes"] == first["id"]
        history = (await client.get(f"{NS}/memories/{second['id']}/history", headers=tenant_a.headers)).json()
        assert [v["id"] for v in history["versions"]] == [first["id"], second["id"]]

    async def test_bad_input(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        for body in (
            {"category": "diet", "preference": "vegan", "confidence": 2},
            {"category": "diet", "preference": "vegan", "scope": "user"},  # a user scope without its user
            {"category": "diet"},
            {"category": "diet", "preference": "vegan", "userId": "ana"},
        ):
            r = await client.post(f"{NS}/preferences", json=body, headers=tenant_a.headers)
            problem(r, 422, "validation_error")


class TestFacts:
    async def test_superseded_relation_and_validity(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        h = tenant_a.headers
        ana = (await client.post(f"{NS}/entities", json={"name": "Ana", "type": "person"}, headers=h)).json()
        oslo = (await client.post(f"{NS}/entities", json={"name": "Oslo", "type": "location"}, headers=h)).json()
        body = {
            "subject": "Ana",
            "predicate": "lives_in",
            "object": "oslo",
            "valid_from": "2019-01-01T00:00:00Z",
            "valid_until": "2023-01-01T00:00:00Z",
        }

        r = await client.post(f"{NS}/facts", json=body, headers=h)

        assert r.status_code == 201, r.text
        fact = r.json()
        assert fact["memory"]["key"] == "fact:ana:lives_in" and fact["memory"]["content"] == "Ana lives in oslo"
        assert fact["memory"]["valid_from"].startswith("2019-01-01")
        assert fact["memory"]["valid_to"].startswith("2023-01-01")
        relation = fact["relation"]
        assert (relation["source_id"], relation["type"], relation["target_id"]) == (ana["id"], "lives_in", oslo["id"])
        assert relation["valid_to"].startswith("2023-01-01")
        relations = (await client.get(f"{NS}/relations", params={"entity_id": ana["id"]}, headers=h)).json()
        assert [x["id"] for x in relations["data"]] == [relation["id"]]

        r = await client.post(f"{NS}/facts", json={**body, "object": "Tromsø", "valid_until": None}, headers=h)
        later = r.json()
        assert later["memory"]["supersedes"] == fact["memory"]["id"] and later["relation"] is None

    async def test_other_tenant_sees_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        r = await client.post(
            f"{NS}/facts", json={"subject": "Ana", "predicate": "age", "object": "41"}, headers=tenant_a.headers
        )
        mine = r.json()["memory"]

        problem(await client.get(f"{NS}/memories/{mine['id']}", headers=tenant_b.headers), 404, "memory_not_found")
        r = await client.post(
            f"{NS}/facts", json={"subject": "Ana", "predicate": "age", "object": "42"}, headers=tenant_b.headers
        )
        assert r.json()["memory"]["supersedes"] is None
        listed = (await client.get(f"{NS}/memories", headers=tenant_a.headers)).json()["data"]
        assert [m["id"] for m in listed] == [mine["id"]]
