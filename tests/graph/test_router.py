"""The entity graph's read-only queries over REST: lookup by name or alias, search and store by
entity, UPPER_SNAKE relation types, paths, related entities, the drawable export, bad input and
tenant isolation. Runs against the real app and the embedded PostgreSQL."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import Tenant
from tests.entities.test_router import MISSING_ID, RELATIONS, entity, graph, relate
from tests.memories.test_router import problem

NS = "/v1/namespaces/default"
GRAPH = f"{NS}/graph"
MEMORIES = f"{NS}/memories"
SEARCH = f"{NS}/search"


async def get(client: httpx.AsyncClient, tenant: Tenant, url: str, **params: Any) -> dict[str, Any]:
    r = await client.get(url, params=params, headers=tenant.headers)
    assert r.status_code == 200, r.text
    return r.json()


async def store(client: httpx.AsyncClient, tenant: Tenant, content: str, **fields: Any) -> dict[str, Any]:
    r = await client.post(MEMORIES, json={"content": content, **fields}, headers=tenant.headers)
    assert r.status_code == 201, r.text
    return r.json()


async def people(client: httpx.AsyncClient, tenant: Tenant) -> dict[str, dict[str, Any]]:
    """Ana and Bob work at Acme; Bob's sister is Cleo; Ana knows Dan."""
    made = {
        "ana": await entity(client, tenant, "Ana Silva", aliases=["Ani"]),
        "bob": await entity(client, tenant, "Bob"),
        "cleo": await entity(client, tenant, "Cleo"),
        "dan": await entity(client, tenant, "Dan"),
        "acme": await entity(client, tenant, "Acme", type="organization"),
    }
    await relate(client, tenant, made["ana"], "WORKS_AT", made["acme"])
    await relate(client, tenant, made["bob"], "works_at", made["acme"])
    await relate(client, tenant, made["bob"], "sister_of", made["cleo"])
    await relate(client, tenant, made["ana"], "knows", made["dan"])
    return made


async def search(client: httpx.AsyncClient, tenant: Tenant, **body: Any) -> httpx.Response:
    return await client.post(SEARCH, json={"query": "where does someone work", **body}, headers=tenant.headers)


class TestRelationTypes:
    async def test_upper_snake_is_the_same_type(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        a, b = await entity(client, tenant_a, "Ana"), await entity(client, tenant_a, "Acme", type="organization")
        made = await relate(client, tenant_a, a, "WORKS_AT", b)
        assert made["type"] == "works_at"

        listed = await get(client, tenant_a, RELATIONS, type="WORKS_AT")
        assert [r["id"] for r in listed["data"]] == [made["id"]]
        assert [r["id"] for r in (await get(client, tenant_a, RELATIONS, type="works_at"))["data"]] == [made["id"]]

    async def test_other_shapes_are_still_refused(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        a, b = await entity(client, tenant_a, "Ana"), await entity(client, tenant_a, "Bob")
        body = {"source_id": a["id"], "type": "works-at", "target_id": b["id"]}
        r = await client.post(RELATIONS, json=body, headers=tenant_a.headers)
        problem(r, 422, "validation_error")


class TestLookup:
    async def test_by_name_or_alias_in_any_case(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        made = await people(client, tenant_a)

        for name in ("ana silva", "ANI", " Ani "):
            found = await get(client, tenant_a, f"{GRAPH}/entities", name=name)
            assert [e["id"] for e in found["data"]] == [made["ana"]["id"]], name
        assert (await get(client, tenant_a, f"{GRAPH}/entities", name="Ana"))["data"] == []

    async def test_name_matches_come_before_alias_matches(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        paris = await entity(client, tenant_a, "Paris", type="location")
        nick = await entity(client, tenant_a, "Paris Hilton", aliases=["Paris"])
        found = await get(client, tenant_a, f"{GRAPH}/entities", name="paris")
        assert [e["id"] for e in found["data"]] == [paris["id"], nick["id"]]
        only = await get(client, tenant_a, f"{GRAPH}/entities", name="paris", type="person")
        assert [e["id"] for e in only["data"]] == [nick["id"]]


class TestStoreAndSearchByEntity:
    async def test_store_links_by_name_and_search_filters_by_name_or_id(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        made = await people(client, tenant_a)
        linked = await store(client, tenant_a, "Ana works at Acme as an engineer", entity_names=["ani"])
        await store(client, tenant_a, "Bob works at Acme in sales")

        assert [m["id"] for m in (await graph(client, tenant_a, made["ana"]["id"]))["memories"]] == [linked["id"]]
        for body in ({"entity": "Ana Silva"}, {"entity": "ANI"}, {"entity_id": made["ana"]["id"]}):
            r = await search(client, tenant_a, **body)
            assert r.status_code == 200, r.text
            assert [h["memory"]["id"] for h in r.json()["results"]] == [linked["id"]], body
        r = await search(client, tenant_a, filters={"entity_id": made["ana"]["id"]})
        assert [h["memory"]["id"] for h in r.json()["results"]] == [linked["id"]]
        assert len((await search(client, tenant_a)).json()["results"]) == 2

    async def test_store_links_by_id_and_name_together(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        made = await people(client, tenant_a)
        m = await store(
            client, tenant_a, "Ana and Bob met at Acme", entity_ids=[made["bob"]["id"]], entity_names=["Ana Silva"]
        )
        for who in ("ana", "bob"):
            assert [x["id"] for x in (await graph(client, tenant_a, made[who]["id"]))["memories"]] == [m["id"]]

    async def test_unknown_or_ambiguous_entity_is_refused(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await people(client, tenant_a)
        await entity(client, tenant_a, "Paris", type="location")
        await entity(client, tenant_a, "Paris", type="person")

        r = await client.post(MEMORIES, json={"content": "x", "entity_names": ["Nobody"]}, headers=tenant_a.headers)
        assert problem(r, 404, "entity_not_found")["field"] == "entity_names"
        assert (await get(client, tenant_a, MEMORIES))["data"] == []  # nothing stored
        r = await client.post(MEMORIES, json={"content": "x", "entity_names": ["paris"]}, headers=tenant_a.headers)
        body = problem(r, 422, "validation_error")
        assert {c["type"] for c in body["candidates"]} == {"location", "person"}

        assert "Nobody" in problem(await search(client, tenant_a, entity="Nobody"), 404, "entity_not_found")["detail"]
        problem(await search(client, tenant_a, entity_id=MISSING_ID), 404, "entity_not_found")
        problem(await search(client, tenant_a, entity="Paris"), 422, "validation_error")


class TestPaths:
    async def test_shortest_first_in_either_direction(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        made = await people(client, tenant_a)
        await relate(client, tenant_a, made["cleo"], "knows", made["ana"])

        out = await get(client, tenant_a, f"{GRAPH}/paths", source="Ani", target="cleo", max_depth=4)
        assert [p["length"] for p in out["paths"]] == [1, 3]
        assert out["paths"][0]["text"] == "Ana Silva <-[knows]- Cleo"
        assert out["paths"][1]["text"] == "Ana Silva -[works_at]-> Acme <-[works_at]- Bob -[sister_of]-> Cleo"
        assert out["paths"][1]["entities"] == [made[k]["id"] for k in ("ana", "acme", "bob", "cleo")]
        assert len(out["relations"]) == 4 and not out["truncated"]

        near = await get(client, tenant_a, f"{GRAPH}/paths", source=made["ana"]["id"], target=made["cleo"]["id"])
        assert [p["length"] for p in near["paths"]] == [1, 3]
        one = await get(client, tenant_a, f"{GRAPH}/paths", source="Ana Silva", target="Cleo", max_depth=2)
        assert [p["length"] for p in one["paths"]] == [1]
        cut = await get(client, tenant_a, f"{GRAPH}/paths", source="Ana Silva", target="Cleo", limit=1)
        assert [p["length"] for p in cut["paths"]] == [1] and cut["truncated"]

    async def test_no_path_is_an_empty_answer(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await people(client, tenant_a)
        lone = await entity(client, tenant_a, "Eve")
        out = await get(client, tenant_a, f"{GRAPH}/paths", source="Dan", target=lone["id"], max_depth=4)
        assert out["paths"] == [] and out["target"]["name"] == "Eve"

    async def test_bad_input(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await people(client, tenant_a)
        r = await client.get(
            f"{GRAPH}/paths", params={"source": "Bob", "target": "Cleo", "max_depth": 5}, headers=tenant_a.headers
        )
        problem(r, 422, "validation_error")
        r = await client.get(f"{GRAPH}/paths", params={"source": "Bob", "target": "Nobody"}, headers=tenant_a.headers)
        assert problem(r, 404, "entity_not_found")["field"] == "target"
        r = await client.get(f"{GRAPH}/paths", params={"source": "Bob", "target": "bob"}, headers=tenant_a.headers)
        problem(r, 422, "validation_error")


class TestRelated:
    async def test_of_a_type_through_a_relation(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        made = await people(client, tenant_a)

        out = await get(client, tenant_a, f"{GRAPH}/related", entity="Ana Silva", type="organization")
        assert [(r["entity"]["name"], r["relation"]["type"], r["direction"]) for r in out["data"]] == [
            ("Acme", "works_at", "out")
        ]
        staff = await get(client, tenant_a, f"{GRAPH}/related", entity="acme", relation="WORKS_AT", direction="in")
        assert [r["entity"]["name"] for r in staff["data"]] == ["Ana Silva", "Bob"]
        assert (await get(client, tenant_a, f"{GRAPH}/related", entity="acme", direction="out"))["data"] == []
        everyone = await get(client, tenant_a, f"{GRAPH}/related", entity=made["ana"]["id"])
        assert [r["entity"]["name"] for r in everyone["data"]] == ["Acme", "Dan"]

    async def test_unknown_entity(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.get(f"{GRAPH}/related", params={"entity": MISSING_ID}, headers=tenant_a.headers)
        problem(r, 404, "entity_not_found")


class TestExport:
    async def test_namespace_user_and_session(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        made = await people(client, tenant_a)
        shared = await store(client, tenant_a, "Acme makes rockets", entity_names=["Acme"])
        mine = await store(client, tenant_a, "Ana is Bob's mentor", user_id="ana", entity_names=["Ani", "Bob"])
        chat = await store(client, tenant_a, "Talked about Cleo", session_id="s1", entity_names=["Cleo"])

        ns = await get(client, tenant_a, GRAPH)
        ids = {n["id"]: n for n in ns["nodes"]}
        assert {e["id"] for e in made.values()} | {shared["id"]} == set(ids)
        assert ids[made["acme"]["id"]] | {"created_at": None} == {
            "id": made["acme"]["id"],
            "kind": "entity",
            "label": "Acme",
            "type": "organization",
            "created_at": None,
        }
        assert ns["counts"] == {"entities": 5, "memories": 1, "relations": 4, "mentions": 1}
        labels = {(e["source"], e["label"], e["target"]) for e in ns["edges"]}
        assert (made["ana"]["id"], "works_at", made["acme"]["id"]) in labels
        assert (shared["id"], "mentions", made["acme"]["id"]) in labels
        assert ns["of"] == "namespace" and not ns["truncated"] and ns["note"] is None

        user = await get(client, tenant_a, GRAPH, user_id="ana")
        assert user["of"] == "user"
        assert {n["id"] for n in user["nodes"]} == {mine["id"], made["ana"]["id"], made["bob"]["id"]}
        assert user["counts"] == {"entities": 2, "memories": 1, "relations": 0, "mentions": 2}

        session = await get(client, tenant_a, GRAPH, session_id="s1")
        assert {n["id"] for n in session["nodes"]} == {chat["id"], made["cleo"]["id"]}
        assert (await get(client, tenant_a, GRAPH, user_id="nobody"))["nodes"] == []

    async def test_bounded_with_a_note(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await people(client, tenant_a)
        out = await get(client, tenant_a, GRAPH, limit=2)
        assert out["counts"]["entities"] == 2 and out["truncated"]
        assert "entities past the newest 2" in out["note"]
        r = await client.get(GRAPH, params={"limit": 5000}, headers=tenant_a.headers)
        problem(r, 422, "validation_error")


class TestTenantIsolation:
    async def test_b_reaches_nothing_of_a(self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant) -> None:
        made = await people(client, tenant_a)
        await store(client, tenant_a, "Ana works at Acme", entity_names=["Ana Silva"])
        await store(client, tenant_b, "Ana works somewhere")

        assert (await get(client, tenant_b, f"{GRAPH}/entities", name="Ana Silva"))["data"] == []
        assert (await get(client, tenant_b, GRAPH))["nodes"] == []
        ana, acme = made["ana"]["id"], made["acme"]["id"]
        r = await client.get(f"{GRAPH}/paths", params={"source": ana, "target": acme}, headers=tenant_b.headers)
        problem(r, 404, "entity_not_found")
        r = await client.get(f"{GRAPH}/related", params={"entity": ana}, headers=tenant_b.headers)
        problem(r, 404, "entity_not_found")
        problem(await search(client, tenant_b, entity_id=ana), 404, "entity_not_found")
        problem(await search(client, tenant_b, entity="Ana Silva"), 404, "entity_not_found")
        r = await client.post(MEMORIES, json={"content": "x", "entity_ids": [ana]}, headers=tenant_b.headers)
        problem(r, 404, "entity_not_found")
