"""The entity graph over REST: entities, relations with valid time, the neighbourhood walk, links
to memories, tenant and namespace isolation, and bad input answered with problem JSON.

Runs against the real app and the embedded PostgreSQL."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select, update

from memvault.api import NamespaceAPI
from memvault.audit.models import AuditEntry
from memvault.entities import repository as entities_repo
from memvault.entities.schemas import EntityIn, EntityType
from memvault.memories.models import Memory
from memvault.namespaces import repository as ns_repo
from tests.conftest import Tenant
from tests.memories.test_router import problem

NS = "/v1/namespaces/default"
ENTITIES = f"{NS}/entities"
RELATIONS = f"{NS}/relations"
MEMORIES = f"{NS}/memories"
MISSING_ID = "00000000-0000-4000-8000-000000000000"
# A credential shape the secrets guard refuses.
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


async def entity(client: httpx.AsyncClient, tenant: Tenant, name: str, **fields: Any) -> dict[str, Any]:
    r = await client.post(ENTITIES, json={"name": name, "type": "person", **fields}, headers=tenant.headers)
    assert r.status_code == 201, r.text
    return r.json()


async def relate(
    client: httpx.AsyncClient, tenant: Tenant, source: dict[str, Any], type_: str, target: dict[str, Any], **fields: Any
) -> dict[str, Any]:
    body = {"source_id": source["id"], "type": type_, "target_id": target["id"], **fields}
    r = await client.post(RELATIONS, json=body, headers=tenant.headers)
    assert r.status_code == 201, r.text
    return r.json()


async def memory(client: httpx.AsyncClient, tenant: Tenant, content: str, ns: str = "default") -> dict[str, Any]:
    r = await client.post(f"/v1/namespaces/{ns}/memories", json={"content": content}, headers=tenant.headers)
    assert r.status_code == 201, r.text
    return r.json()


async def link(client: httpx.AsyncClient, tenant: Tenant, memory_id: str, *entity_ids: str) -> httpx.Response:
    return await client.post(
        f"{MEMORIES}/{memory_id}/entities", json={"entity_ids": list(entity_ids)}, headers=tenant.headers
    )


async def graph(client: httpx.AsyncClient, tenant: Tenant, entity_id: str, **params: Any) -> dict[str, Any]:
    r = await client.get(f"{ENTITIES}/{entity_id}", params=params, headers=tenant.headers)
    assert r.status_code == 200, r.text
    return r.json()


async def listed(client: httpx.AsyncClient, tenant: Tenant, url: str = ENTITIES, **params: Any) -> list[dict[str, Any]]:
    r = await client.get(url, params={"limit": 200, **params}, headers=tenant.headers)
    assert r.status_code == 200, r.text
    return r.json()["data"]


def names(entities: list[dict[str, Any]]) -> list[str]:
    return [e["name"] for e in entities]


def distances(g: dict[str, Any]) -> dict[str, int]:
    return {n["entity"]["name"]: n["distance"] for n in g["neighbours"]}


async def create_namespace(client: httpx.AsyncClient, tenant: Tenant, name: str) -> None:
    r = await client.post("/v1/namespaces", json={"name": name}, headers=tenant.headers)
    assert r.status_code == 201, r.text


async def audit_actions(api: NamespaceAPI, tenant: Tenant) -> list[tuple[str, str | None]]:
    async with api._db.tenant_tx(tenant.id) as tx:
        rows = await tx.session.scalars(
            select(AuditEntry).where(AuditEntry.tenant_id == tenant.id).order_by(AuditEntry.id)
        )
        return [(a.action, a.target_id) for a in rows]


# ---- entities -------------------------------------------------------------------------------


class TestCreateEntity:
    async def test_returns_201_with_every_field(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        body = {
            "name": "  Alice Martin ",
            "type": "person",
            "aliases": ["Ali", "ali", "Dr. Martin"],
            "description": "The user's sister, a nurse in Lisbon",
            "metadata": {"source": "chat", "age": 34},
        }
        r = await client.post(ENTITIES, json=body, headers=tenant_a.headers)

        assert r.status_code == 201, r.text
        e = r.json()
        uuid.UUID(e["id"])
        assert e["namespace"] == "default"
        assert e["name"] == "Alice Martin"
        assert e["aliases"] == ["Ali", "Dr. Martin"]
        assert (e["type"], e["description"], e["metadata"]) == ("person", body["description"], body["metadata"])
        assert e["created_by"].startswith("key:")
        assert e["created_at"] == e["updated_at"]

    async def test_only_the_name_is_required(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post(ENTITIES, json={"name": "Lisbon"}, headers=tenant_a.headers)

        assert r.status_code == 201, r.text
        e = r.json()
        assert (e["type"], e["aliases"], e["description"], e["metadata"]) == ("other", [], None, {})

    async def test_same_type_and_name_in_any_case_is_409(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        first = await entity(client, tenant_a, "Alice")

        r = await client.post(ENTITIES, json={"name": "ALICE ", "type": "person"}, headers=tenant_a.headers)

        body = problem(r, 409, "entity_exists")
        assert body["existing_id"] == first["id"]
        assert names(await listed(client, tenant_a)) == ["Alice"]

    async def test_same_name_with_another_type_is_a_new_entity(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        await entity(client, tenant_a, "Jordan")
        await entity(client, tenant_a, "Jordan", type="location")

        assert sorted(e["type"] for e in await listed(client, tenant_a)) == ["location", "person"]

    async def test_same_name_in_another_namespace_is_a_new_entity(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        await create_namespace(client, tenant_a, "work")
        await entity(client, tenant_a, "Alice")

        r = await client.post("/v1/namespaces/work/entities", json={"name": "Alice"}, headers=tenant_a.headers)

        assert r.status_code == 201, r.text

    async def test_unknown_namespace_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post("/v1/namespaces/nope/entities", json={"name": "Alice"}, headers=tenant_a.headers)

        problem(r, 404, "namespace_not_found")

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"name": SECRET}, "name"),
            ({"name": "Alice", "aliases": ["Al", f"token {SECRET}"]}, "aliases[1]"),
            ({"name": "Alice", "description": f"her key is {SECRET}"}, "description"),
            ({"name": "Alice", "metadata": {"nested": {"token": SECRET}}}, "metadata"),
        ],
    )
    async def test_secrets_are_refused(
        self, client: httpx.AsyncClient, tenant_a: Tenant, body: dict[str, Any], field: str
    ) -> None:
        for upsert in ("false", "true"):
            r = await client.post(ENTITIES, params={"upsert": upsert}, json=body, headers=tenant_a.headers)

            assert problem(r, 422, "secret_detected")["field"].startswith(field)
        assert await listed(client, tenant_a) == []


class TestUpsert:
    async def test_merges_aliases_description_and_metadata(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        first = await entity(
            client, tenant_a, "Alice", aliases=["Ali"], description="Sister", metadata={"a": 1, "b": 1}
        )
        body = {
            "name": "alice",
            "type": "person",
            "aliases": ["ALI", "Alice M."],
            "description": "Sister, a nurse",
            "metadata": {"b": 2, "c": 3},
        }

        r = await client.post(ENTITIES, params={"upsert": "true"}, json=body, headers=tenant_a.headers)

        assert r.status_code == 200, r.text
        e = r.json()
        assert e["id"] == first["id"]
        assert e["name"] == "Alice"
        assert e["aliases"] == ["Ali", "Alice M."]
        assert e["description"] == "Sister, a nurse"
        assert e["metadata"] == {"a": 1, "b": 2, "c": 3}
        assert e["updated_at"] > first["updated_at"]

    async def test_keeps_the_description_when_none_is_given(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await entity(client, tenant_a, "Alice", description="Sister")

        r = await client.post(
            ENTITIES, params={"upsert": "true"}, json={"name": "Alice", "type": "person"}, headers=tenant_a.headers
        )

        assert r.status_code == 200, r.text
        assert r.json()["description"] == "Sister"

    async def test_creates_when_new(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post(ENTITIES, params={"upsert": "true"}, json={"name": "Bob"}, headers=tenant_a.headers)

        assert r.status_code == 201, r.text
        assert names(await listed(client, tenant_a)) == ["Bob"]

    async def test_facade_reports_whether_it_created(self, api: NamespaceAPI, tenant_a: Tenant) -> None:
        p = tenant_a.principal
        body = EntityIn(name="Acme", type=EntityType.organization, aliases=["Acme Corp"])

        first, created = await api.upsert_entity(p, "default", body)
        again, created_again = await api.upsert_entity(p, "default", body)

        assert (created, created_again) == (True, False)
        assert again.id == first.id
        assert again.updated_at == first.updated_at  # nothing new: no write at all

    async def test_merged_metadata_over_the_limit_is_422(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await entity(client, tenant_a, "Alice", metadata={"a": "x" * 10_000})

        r = await client.post(
            ENTITIES,
            params={"upsert": "true"},
            json={"name": "Alice", "type": "person", "metadata": {"b": "y" * 10_000}},
            headers=tenant_a.headers,
        )

        assert problem(r, 422, "validation_error")["field"] == "metadata"


class TestListEntities:
    async def test_newest_first(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        for name in ("Alice", "Bob", "Carol"):
            await entity(client, tenant_a, name)

        assert names(await listed(client, tenant_a)) == ["Carol", "Bob", "Alice"]

    async def test_cursor_visits_every_entity_once(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        created = [(await entity(client, tenant_a, f"Person {i}"))["id"] for i in range(7)]
        seen: list[str] = []
        cursor = None
        for _ in range(10):
            params: dict[str, Any] = {"limit": 3, **({"cursor": cursor} if cursor else {})}
            r = await client.get(ENTITIES, params=params, headers=tenant_a.headers)
            assert r.status_code == 200, r.text
            page = r.json()
            seen += [e["id"] for e in page["data"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break

        assert seen == list(reversed(created))

    async def test_filter_by_type(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await entity(client, tenant_a, "Alice")
        await entity(client, tenant_a, "Lisbon", type="location")

        assert names(await listed(client, tenant_a, type="location")) == ["Lisbon"]

    async def test_q_matches_part_of_a_name_or_an_alias_in_any_case(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        await entity(client, tenant_a, "Alice Martin", aliases=["Ali"])
        await entity(client, tenant_a, "Robert", aliases=["Bobby", "Rob"])
        await entity(client, tenant_a, "Carol")

        assert names(await listed(client, tenant_a, q="MART")) == ["Alice Martin"]
        assert names(await listed(client, tenant_a, q="bob")) == ["Robert"]
        assert sorted(names(await listed(client, tenant_a, q="ro"))) == ["Carol", "Robert"]
        assert await listed(client, tenant_a, q="zed") == []

    async def test_q_wildcards_are_literal(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await entity(client, tenant_a, "100% Cotton", type="object")
        await entity(client, tenant_a, "snake_case", type="concept")
        await entity(client, tenant_a, "Plain")

        assert names(await listed(client, tenant_a, q="%")) == ["100% Cotton"]
        assert names(await listed(client, tenant_a, q="_")) == ["snake_case"]

    async def test_filters_combine(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await entity(client, tenant_a, "Jordan")
        await entity(client, tenant_a, "Jordan", type="location")

        assert [e["type"] for e in await listed(client, tenant_a, q="jord", type="location")] == ["location"]

    @pytest.mark.parametrize("cursor", ["not-a-cursor", "bnVsbA", "WzEsMl0", "!!!"])
    async def test_garbage_cursor_is_422(self, client: httpx.AsyncClient, tenant_a: Tenant, cursor: str) -> None:
        r = await client.get(ENTITIES, params={"cursor": cursor}, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == "cursor"

    @pytest.mark.parametrize(
        ("params", "field"),
        [
            ({"type": "alien"}, "type"),
            ({"limit": 0}, "limit"),
            ({"limit": 201}, "limit"),
            ({"limit": "ten"}, "limit"),
            ({"q": ""}, "q"),
            ({"q": "a\u0000b"}, "q"),
            ({"q": "x" * 201}, "q"),
            ({"cursor": "c" * 501}, "cursor"),
        ],
    )
    async def test_bad_query_parameter_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, params: dict[str, Any], field: str
    ) -> None:
        r = await client.get(ENTITIES, params=params, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == field

    async def test_unknown_namespace_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        problem(await client.get("/v1/namespaces/nope/entities", headers=tenant_a.headers), 404, "namespace_not_found")

    async def test_only_the_namespace_s_entities(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await create_namespace(client, tenant_a, "work")
        await entity(client, tenant_a, "Alice")

        assert await listed(client, tenant_a, "/v1/namespaces/work/entities") == []


class TestUpdateEntity:
    async def test_changes_the_given_fields_only(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        e = await entity(client, tenant_a, "Alice", aliases=["Ali"], description="Sister", metadata={"a": 1})

        r = await client.patch(
            f"{ENTITIES}/{e['id']}", json={"aliases": ["Al"], "metadata": {"b": 2}}, headers=tenant_a.headers
        )

        assert r.status_code == 200, r.text
        out = r.json()
        assert (out["name"], out["aliases"], out["description"], out["metadata"]) == (
            "Alice",
            ["Al"],
            "Sister",
            {"b": 2},
        )
        assert out["updated_at"] > e["updated_at"]
        assert (await graph(client, tenant_a, e["id"]))["entity"] == out

    async def test_rename_retype_and_clear_description(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        e = await entity(client, tenant_a, "Acme", description="A company")

        r = await client.patch(
            f"{ENTITIES}/{e['id']}",
            json={"name": "Acme Corp", "type": "organization", "description": None},
            headers=tenant_a.headers,
        )

        assert r.status_code == 200, r.text
        assert (r.json()["name"], r.json()["type"], r.json()["description"]) == ("Acme Corp", "organization", None)

    async def test_renaming_onto_another_entity_is_409(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        alice = await entity(client, tenant_a, "Alice")
        bob = await entity(client, tenant_a, "Bob")

        r = await client.patch(f"{ENTITIES}/{bob['id']}", json={"name": "alice"}, headers=tenant_a.headers)

        assert problem(r, 409, "entity_exists")["existing_id"] == alice["id"]

    async def test_changing_the_case_of_its_own_name(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        e = await entity(client, tenant_a, "alice")

        r = await client.patch(f"{ENTITIES}/{e['id']}", json={"name": "Alice"}, headers=tenant_a.headers)

        assert r.status_code == 200, r.text
        assert r.json()["name"] == "Alice"

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({}, "body"),
            ({"name": None}, "name"),
            ({"type": None}, "type"),
            ({"aliases": None}, "aliases"),
            ({"metadata": None}, "metadata"),
            ({"name": " "}, "name"),
            ({"type": "alien"}, "type"),
            ({"colour": "blue"}, "colour"),
        ],
    )
    async def test_invalid_patch_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, body: dict[str, Any], field: str
    ) -> None:
        e = await entity(client, tenant_a, "Alice")

        r = await client.patch(f"{ENTITIES}/{e['id']}", json=body, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == field

    async def test_secret_in_patch_is_refused(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        e = await entity(client, tenant_a, "Alice")

        r = await client.patch(f"{ENTITIES}/{e['id']}", json={"description": SECRET}, headers=tenant_a.headers)

        problem(r, 422, "secret_detected")
        assert (await graph(client, tenant_a, e["id"]))["entity"]["description"] is None

    async def test_unknown_id_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.patch(f"{ENTITIES}/{MISSING_ID}", json={"name": "X"}, headers=tenant_a.headers)

        problem(r, 404, "entity_not_found")


class TestDeleteEntity:
    async def test_takes_relations_and_links_but_not_memories(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        alice, bob = await entity(client, tenant_a, "Alice"), await entity(client, tenant_a, "Bob")
        await relate(client, tenant_a, alice, "sister_of", bob)
        m = await memory(client, tenant_a, "Alice and Bob went hiking")
        assert (await link(client, tenant_a, m["id"], alice["id"], bob["id"])).status_code == 200

        r = await client.delete(f"{ENTITIES}/{alice['id']}", headers=tenant_a.headers)

        assert r.status_code == 204, r.text
        problem(await client.get(f"{ENTITIES}/{alice['id']}", headers=tenant_a.headers), 404, "entity_not_found")
        assert await listed(client, tenant_a, RELATIONS) == []
        assert (await client.get(f"{MEMORIES}/{m['id']}", headers=tenant_a.headers)).status_code == 200
        assert [x["id"] for x in (await graph(client, tenant_a, bob["id"]))["memories"]] == [m["id"]]

    async def test_deleting_twice_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        e = await entity(client, tenant_a, "Alice")
        assert (await client.delete(f"{ENTITIES}/{e['id']}", headers=tenant_a.headers)).status_code == 204

        problem(await client.delete(f"{ENTITIES}/{e['id']}", headers=tenant_a.headers), 404, "entity_not_found")


# ---- the neighbourhood walk -----------------------------------------------------------------


@pytest.fixture
async def small_graph(client: httpx.AsyncClient, tenant_a: Tenant) -> dict[str, dict[str, Any]]:
    """A chain A -> B -> C -> D, a triangle A -> B -> E -> A, and a loner F:

    E ---> A ---> B ---> C ---> D          F
     ^____________|
    """
    nodes = {n: await entity(client, tenant_a, n) for n in "ABCDEF"}
    edges = {}
    for src, dst in ("AB", "BC", "CD", "BE", "EA"):
        edges[src + dst] = await relate(client, tenant_a, nodes[src], "knows", nodes[dst])
    return {**nodes, **edges}


class TestGraph:
    async def test_one_hop_follows_relations_both_ways(
        self, client: httpx.AsyncClient, tenant_a: Tenant, small_graph: dict[str, dict[str, Any]]
    ) -> None:
        g = await graph(client, tenant_a, small_graph["A"]["id"])

        assert g["hops"] == 1
        assert g["entity"]["name"] == "A"
        assert distances(g) == {"B": 1, "E": 1}
        # Every relation among A, B and E, including the one between the two neighbours.
        assert {r["id"] for r in g["relations"]} == {small_graph[k]["id"] for k in ("AB", "BE", "EA")}

    async def test_two_hops(
        self, client: httpx.AsyncClient, tenant_a: Tenant, small_graph: dict[str, dict[str, Any]]
    ) -> None:
        g = await graph(client, tenant_a, small_graph["A"]["id"], hops=2)

        assert distances(g) == {"B": 1, "E": 1, "C": 2}
        assert [n["entity"]["name"] for n in g["neighbours"]] == ["B", "E", "C"]
        assert {r["id"] for r in g["relations"]} == {small_graph[k]["id"] for k in ("AB", "BE", "EA", "BC")}

    async def test_three_hops_through_a_cycle_ends(
        self, client: httpx.AsyncClient, tenant_a: Tenant, small_graph: dict[str, dict[str, Any]]
    ) -> None:
        g = await graph(client, tenant_a, small_graph["A"]["id"], hops=3)

        assert distances(g) == {"B": 1, "E": 1, "C": 2, "D": 3}
        d = next(n for n in g["neighbours"] if n["entity"]["name"] == "D")
        assert d["path"] == [small_graph[n]["id"] for n in "ABCD"]
        assert d["relation_path"] == [small_graph[k]["id"] for k in ("AB", "BC", "CD")]
        assert len(g["relations"]) == 5

    async def test_shortest_distance_wins_on_a_cycle(
        self, client: httpx.AsyncClient, tenant_a: Tenant, small_graph: dict[str, dict[str, Any]]
    ) -> None:
        # From E, A is one step back along E -> A, not two along E <- B <- A.
        g = await graph(client, tenant_a, small_graph["E"]["id"], hops=3)

        assert distances(g) == {"A": 1, "B": 1, "C": 2, "D": 3}
        a = next(n for n in g["neighbours"] if n["entity"]["name"] == "A")
        assert a["relation_path"] == [small_graph["EA"]["id"]]

    async def test_walks_against_the_arrows(
        self, client: httpx.AsyncClient, tenant_a: Tenant, small_graph: dict[str, dict[str, Any]]
    ) -> None:
        g = await graph(client, tenant_a, small_graph["D"]["id"], hops=2)

        assert distances(g) == {"C": 1, "B": 2}

    async def test_zero_hops_is_the_entity_alone(
        self, client: httpx.AsyncClient, tenant_a: Tenant, small_graph: dict[str, dict[str, Any]]
    ) -> None:
        g = await graph(client, tenant_a, small_graph["A"]["id"], hops=0)

        assert (g["neighbours"], g["relations"]) == ([], [])

    async def test_an_entity_without_relations(
        self, client: httpx.AsyncClient, tenant_a: Tenant, small_graph: dict[str, dict[str, Any]]
    ) -> None:
        g = await graph(client, tenant_a, small_graph["F"]["id"], hops=3)

        assert (g["neighbours"], g["relations"], g["memories"]) == ([], [], [])

    async def test_facade_walk(
        self, api: NamespaceAPI, tenant_a: Tenant, small_graph: dict[str, dict[str, Any]]
    ) -> None:
        g = await api.get_entity(tenant_a.principal, "default", uuid.UUID(small_graph["C"]["id"]), hops=1)

        assert {n.entity.name: n.distance for n in g.neighbours} == {"B": 1, "D": 1}

    @pytest.mark.parametrize("hops", [4, -1, "two", 1.5])
    async def test_hops_out_of_range_is_422(self, client: httpx.AsyncClient, tenant_a: Tenant, hops: Any) -> None:
        e = await entity(client, tenant_a, "A")

        r = await client.get(f"{ENTITIES}/{e['id']}", params={"hops": hops}, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == "hops"

    async def test_unknown_id_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        problem(await client.get(f"{ENTITIES}/{MISSING_ID}", headers=tenant_a.headers), 404, "entity_not_found")


class TestValidTime:
    @pytest.fixture
    async def jobs(self, client: httpx.AsyncClient, tenant_a: Tenant) -> dict[str, dict[str, Any]]:
        """Alice worked at Initech in 2020-2021 and has worked at Globex since 2022."""
        alice = await entity(client, tenant_a, "Alice")
        initech = await entity(client, tenant_a, "Initech", type="organization")
        globex = await entity(client, tenant_a, "Globex", type="organization")
        old = await relate(
            client, tenant_a, alice, "works_at", initech, valid_from="2020-01-01T00:00:00Z", valid_to="2022-01-01"
        )
        new = await relate(client, tenant_a, alice, "works_at", globex, valid_from="2022-01-01T00:00:00Z")
        return {"alice": alice, "old": old, "new": new}

    @pytest.mark.parametrize(
        ("at", "expected"),
        [
            (None, {"Initech", "Globex"}),
            ("2019-06-01T00:00:00Z", set()),
            ("2021-06-01T00:00:00Z", {"Initech"}),
            ("2021-06-01T00:00:00", {"Initech"}),  # no offset: UTC
            ("2022-01-01T00:00:00Z", {"Globex"}),  # the old job ended at that instant
            ("2030-01-01T00:00:00+05:00", {"Globex"}),
        ],
    )
    async def test_valid_at_follows_only_relations_valid_then(
        self,
        client: httpx.AsyncClient,
        tenant_a: Tenant,
        jobs: dict[str, dict[str, Any]],
        at: str | None,
        expected: set[str],
    ) -> None:
        params = {"valid_at": at} if at else {}

        g = await graph(client, tenant_a, jobs["alice"]["id"], **params)
        rels = await listed(client, tenant_a, RELATIONS, **params)

        assert set(distances(g)) == expected
        assert {r["target_id"] for r in g["relations"]} == {n["entity"]["id"] for n in g["neighbours"]}
        assert len(rels) == len(expected)

    async def test_valid_at_is_echoed_in_utc(
        self, client: httpx.AsyncClient, tenant_a: Tenant, jobs: dict[str, dict[str, Any]]
    ) -> None:
        g = await graph(client, tenant_a, jobs["alice"]["id"], valid_at="2021-06-01T02:00:00+02:00")

        assert g["valid_at"] in ("2021-06-01T00:00:00Z", "2021-06-01T00:00:00+00:00")

    @pytest.mark.parametrize("at", ["yesterday", "2021-13-01", "0001-01-01T00:00:00+05:00"])
    async def test_bad_valid_at_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, jobs: dict[str, dict[str, Any]], at: str
    ) -> None:
        for url in (f"{ENTITIES}/{jobs['alice']['id']}", RELATIONS):
            r = await client.get(url, params={"valid_at": at}, headers=tenant_a.headers)

            assert problem(r, 422, "validation_error")["field"] == "valid_at"


# ---- relations ------------------------------------------------------------------------------


class TestRelations:
    async def test_returns_201_with_every_field(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        alice, acme = (
            await entity(client, tenant_a, "Alice"),
            await entity(client, tenant_a, "Acme", type="organization"),
        )
        body = {
            "source_id": alice["id"],
            "type": "works_at",
            "target_id": acme["id"],
            "valid_from": "2024-01-01T00:00:00Z",
            "valid_to": "2025-01-01T00:00:00+01:00",
            "confidence": 0.9,
            "metadata": {"source": "chat"},
        }

        r = await client.post(RELATIONS, json=body, headers=tenant_a.headers)

        assert r.status_code == 201, r.text
        rel = r.json()
        uuid.UUID(rel["id"])
        assert (rel["namespace"], rel["source_id"], rel["type"], rel["target_id"]) == (
            "default",
            alice["id"],
            "works_at",
            acme["id"],
        )
        assert rel["confidence"] == 0.9
        assert rel["valid_to"].startswith("2024-12-31T23:00:00")
        assert rel["metadata"] == {"source": "chat"}
        assert (await listed(client, tenant_a, RELATIONS)) == [rel]

    async def test_defaults(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        rel = await relate(
            client, tenant_a, await entity(client, tenant_a, "A"), "knows", await entity(client, tenant_a, "B")
        )

        assert (rel["valid_from"], rel["valid_to"], rel["confidence"], rel["metadata"]) == (None, None, 1.0, {})

    async def test_list_filters_by_either_end_and_type(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        a, b, c = [await entity(client, tenant_a, n) for n in "ABC"]
        ab = await relate(client, tenant_a, a, "knows", b)
        bc = await relate(client, tenant_a, b, "sister_of", c)

        def ids(rels: list[dict[str, Any]]) -> set[str]:
            return {r["id"] for r in rels}

        assert ids(await listed(client, tenant_a, RELATIONS, entity_id=b["id"])) == {ab["id"], bc["id"]}
        assert ids(await listed(client, tenant_a, RELATIONS, entity_id=c["id"])) == {bc["id"]}
        assert ids(await listed(client, tenant_a, RELATIONS, type="knows")) == {ab["id"]}
        assert await listed(client, tenant_a, RELATIONS, type="knows", entity_id=c["id"]) == []

    async def test_cursor_visits_every_relation_once(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        hub = await entity(client, tenant_a, "Hub")
        created = [
            (await relate(client, tenant_a, hub, "knows", await entity(client, tenant_a, f"P{i}")))["id"]
            for i in range(5)
        ]
        seen: list[str] = []
        cursor = None
        for _ in range(10):
            params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
            page = (await client.get(RELATIONS, params=params, headers=tenant_a.headers)).json()
            seen += [r["id"] for r in page["data"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break

        assert seen == list(reversed(created))

    async def test_delete(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        a, b = await entity(client, tenant_a, "A"), await entity(client, tenant_a, "B")
        rel = await relate(client, tenant_a, a, "knows", b)

        assert (await client.delete(f"{RELATIONS}/{rel['id']}", headers=tenant_a.headers)).status_code == 204
        problem(await client.delete(f"{RELATIONS}/{rel['id']}", headers=tenant_a.headers), 404, "relation_not_found")
        assert await listed(client, tenant_a, RELATIONS) == []
        assert len(await listed(client, tenant_a)) == 2

    async def test_unknown_entity_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        a = await entity(client, tenant_a, "A")

        for body, field in (
            ({"source_id": MISSING_ID, "type": "knows", "target_id": a["id"]}, "source_id"),
            ({"source_id": a["id"], "type": "knows", "target_id": MISSING_ID}, "target_id"),
        ):
            r = await client.post(RELATIONS, json=body, headers=tenant_a.headers)
            assert problem(r, 404, "entity_not_found")["field"] == field

    async def test_entities_of_another_namespace_cannot_be_related(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        await create_namespace(client, tenant_a, "work")
        here = await entity(client, tenant_a, "A")
        r = await client.post("/v1/namespaces/work/entities", json={"name": "B"}, headers=tenant_a.headers)
        there = r.json()

        r = await client.post(
            RELATIONS,
            json={"source_id": here["id"], "type": "knows", "target_id": there["id"]},
            headers=tenant_a.headers,
        )

        assert problem(r, 404, "entity_not_found")["field"] == "target_id"

    async def test_secret_in_metadata_is_refused(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        a, b = await entity(client, tenant_a, "A"), await entity(client, tenant_a, "B")
        body = {"source_id": a["id"], "type": "knows", "target_id": b["id"], "metadata": {"k": SECRET}}

        problem(await client.post(RELATIONS, json=body, headers=tenant_a.headers), 422, "secret_detected")
        assert await listed(client, tenant_a, RELATIONS) == []

    @pytest.mark.parametrize(
        ("change", "field"),
        [
            ({"target_id": "SELF"}, "target_id"),
            ({"type": "Works At"}, "type"),
            ({"type": "works-at"}, "type"),
            ({"type": "1st_of"}, "type"),
            ({"type": ""}, "type"),
            ({"type": "x" * 64}, "type"),
            ({"type": None}, "type"),
            ({"source_id": "not-a-uuid"}, "source_id"),
            ({"confidence": 1.5}, "confidence"),
            ({"confidence": "high"}, "confidence"),
            ({"valid_from": "2025-01-01T00:00:00Z", "valid_to": "2024-01-01T00:00:00Z"}, "valid_to"),
            ({"valid_from": "soon"}, "valid_from"),
            ({"metadata": [1]}, "metadata"),
            ({"weight": 3}, "weight"),
        ],
    )
    async def test_invalid_relation_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, change: dict[str, Any], field: str
    ) -> None:
        a, b = await entity(client, tenant_a, "A"), await entity(client, tenant_a, "B")
        body = {"source_id": a["id"], "type": "knows", "target_id": b["id"], **change}
        if body["target_id"] == "SELF":
            body["target_id"] = a["id"]

        r = await client.post(RELATIONS, json=body, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == field
        assert await listed(client, tenant_a, RELATIONS) == []

    @pytest.mark.parametrize(
        "params", [{"type": "Not A Verb"}, {"entity_id": "nope"}, {"limit": 0}, {"cursor": "bnVsbA"}]
    )
    async def test_bad_list_parameter_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, params: dict[str, Any]
    ) -> None:
        r = await client.get(RELATIONS, params=params, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == next(iter(params))


# ---- memory links ---------------------------------------------------------------------------


class TestLinks:
    async def test_linked_memories_show_on_the_entity(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        alice, bob = await entity(client, tenant_a, "Alice"), await entity(client, tenant_a, "Bob")
        first = await memory(client, tenant_a, "Alice is a nurse in Lisbon")
        second = await memory(client, tenant_a, "Alice prefers tea over coffee")

        r = await link(client, tenant_a, first["id"], alice["id"], bob["id"])
        assert r.status_code == 200, r.text
        assert r.json()["memory_id"] == first["id"]
        assert names(r.json()["entities"]) == ["Alice", "Bob"]
        assert (await link(client, tenant_a, second["id"], alice["id"])).status_code == 200

        g = await graph(client, tenant_a, alice["id"])
        assert [(m["id"], m["content"], m["type"]) for m in g["memories"]] == [
            (second["id"], second["content"], "fact"),
            (first["id"], first["content"], "fact"),
        ]
        assert [m["id"] for m in (await graph(client, tenant_a, bob["id"]))["memories"]] == [first["id"]]

    async def test_linking_twice_is_harmless(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        alice = await entity(client, tenant_a, "Alice")
        m = await memory(client, tenant_a, "Alice is a nurse")

        for _ in range(2):
            r = await link(client, tenant_a, m["id"], alice["id"], alice["id"])
            assert r.status_code == 200, r.text
            assert names(r.json()["entities"]) == ["Alice"]
        assert len((await graph(client, tenant_a, alice["id"]))["memories"]) == 1

    async def test_one_unknown_entity_links_nothing(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        alice = await entity(client, tenant_a, "Alice")
        m = await memory(client, tenant_a, "Alice is a nurse")

        r = await link(client, tenant_a, m["id"], alice["id"], MISSING_ID)

        assert problem(r, 404, "entity_not_found")["entity_ids"] == [MISSING_ID]
        assert (await graph(client, tenant_a, alice["id"]))["memories"] == []

    async def test_unknown_memory_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        alice = await entity(client, tenant_a, "Alice")

        problem(await link(client, tenant_a, MISSING_ID, alice["id"]), 404, "memory_not_found")

    async def test_memory_and_entities_must_share_the_namespace(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        await create_namespace(client, tenant_a, "work")
        alice = await entity(client, tenant_a, "Alice")
        elsewhere = await memory(client, tenant_a, "Quarterly review moved", ns="work")
        here = await memory(client, tenant_a, "Alice is a nurse")
        r = await client.post("/v1/namespaces/work/entities", json={"name": "Bob"}, headers=tenant_a.headers)
        work_bob = r.json()

        problem(await link(client, tenant_a, elsewhere["id"], alice["id"]), 404, "memory_not_found")
        problem(await link(client, tenant_a, here["id"], work_bob["id"]), 404, "entity_not_found")

    async def test_unlink(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        alice = await entity(client, tenant_a, "Alice")
        m = await memory(client, tenant_a, "Alice is a nurse")
        await link(client, tenant_a, m["id"], alice["id"])
        url = f"{MEMORIES}/{m['id']}/entities/{alice['id']}"

        assert (await client.delete(url, headers=tenant_a.headers)).status_code == 204
        problem(await client.delete(url, headers=tenant_a.headers), 404, "entity_link_not_found")
        assert (await graph(client, tenant_a, alice["id"]))["memories"] == []
        assert (await client.get(f"{MEMORIES}/{m['id']}", headers=tenant_a.headers)).status_code == 200

    async def test_unlink_unknown_memory_or_entity_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        alice = await entity(client, tenant_a, "Alice")
        m = await memory(client, tenant_a, "Alice is a nurse")

        r = await client.delete(f"{MEMORIES}/{MISSING_ID}/entities/{alice['id']}", headers=tenant_a.headers)
        problem(r, 404, "memory_not_found")
        r = await client.delete(f"{MEMORIES}/{m['id']}/entities/{MISSING_ID}", headers=tenant_a.headers)
        problem(r, 404, "entity_not_found")

    async def test_archived_and_deleted_memories_are_not_shown(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        alice = await entity(client, tenant_a, "Alice")
        kept, archived, deleted = [
            await memory(client, tenant_a, text) for text in ("Alice is a nurse", "Alice lived in Porto", "Alice typo")
        ]
        for m in (kept, archived, deleted):
            await link(client, tenant_a, m["id"], alice["id"])
        r = await client.patch(f"{MEMORIES}/{archived['id']}", json={"state": "archived"}, headers=tenant_a.headers)
        assert r.status_code == 200, r.text
        assert (await client.delete(f"{MEMORIES}/{deleted['id']}", headers=tenant_a.headers)).status_code == 204

        assert [m["id"] for m in (await graph(client, tenant_a, alice["id"]))["memories"]] == [kept["id"]]

    async def test_superseded_memories_are_not_shown(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        alice = await entity(client, tenant_a, "Alice")
        old, current = [await memory(client, tenant_a, t) for t in ("Alice works at Initech", "Alice works at Globex")]
        await link(client, tenant_a, old["id"], alice["id"])
        await link(client, tenant_a, current["id"], alice["id"])
        # Marked superseded directly: how a memory comes to be superseded is the memory API's business.
        async with api._db.tenant_tx(tenant_a.id) as tx:
            await tx.session.execute(
                update(Memory)
                .where(Memory.tenant_id == tenant_a.id, Memory.id == uuid.UUID(old["id"]))
                .values(superseded_at=func.now())
            )

        assert [m["id"] for m in (await graph(client, tenant_a, alice["id"]))["memories"]] == [current["id"]]

    async def test_repository_link_checks_every_entity(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        # The memory write path links through this function inside its own transaction.
        await create_namespace(client, tenant_a, "work")
        alice = await entity(client, tenant_a, "Alice")
        m = await memory(client, tenant_a, "Alice is a nurse")
        r = await client.post("/v1/namespaces/work/entities", json={"name": "Bob"}, headers=tenant_a.headers)
        work_bob = uuid.UUID(r.json()["id"])

        with pytest.raises(entities_repo.EntityNotFound):
            async with api._db.tenant_tx(tenant_a.id) as tx:
                ns = await ns_repo.by_name(tx.session, tenant_a.id, "default")
                assert ns is not None
                await entities_repo.link_memories(
                    tx.session, tenant_a.id, ns.id, uuid.UUID(m["id"]), [uuid.UUID(alice["id"]), work_bob]
                )
        async with api._db.tenant_tx(tenant_a.id) as tx:
            ns = await ns_repo.by_name(tx.session, tenant_a.id, "default")
            assert ns is not None
            added = await entities_repo.link_memories(
                tx.session, tenant_a.id, ns.id, uuid.UUID(m["id"]), [uuid.UUID(alice["id"])] * 2
            )

        assert added == 1
        assert [x["id"] for x in (await graph(client, tenant_a, alice["id"]))["memories"]] == [m["id"]]

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"entity_ids": []}, "entity_ids"),
            ({"entity_ids": ["nope"]}, "entity_ids[0]"),
            ({"entity_ids": [MISSING_ID] * 101}, "entity_ids"),
            ({"entity_ids": MISSING_ID}, "entity_ids"),
            ({}, "entity_ids"),
            ({"entity_ids": [MISSING_ID], "extra": 1}, "extra"),
        ],
    )
    async def test_invalid_link_body_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, body: dict[str, Any], field: str
    ) -> None:
        m = await memory(client, tenant_a, "Alice is a nurse")

        r = await client.post(f"{MEMORIES}/{m['id']}/entities", json=body, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == field


# ---- audit ----------------------------------------------------------------------------------


class TestAudit:
    async def test_every_write_is_audited(self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant) -> None:
        a, b = await entity(client, tenant_a, "Alice"), await entity(client, tenant_a, "Bob")
        rel = await relate(client, tenant_a, a, "knows", b)
        m = await memory(client, tenant_a, "Alice knows Bob")
        await link(client, tenant_a, m["id"], a["id"])
        await client.delete(f"{MEMORIES}/{m['id']}/entities/{a['id']}", headers=tenant_a.headers)
        await client.patch(f"{ENTITIES}/{a['id']}", json={"description": "Sister"}, headers=tenant_a.headers)
        await client.post(
            ENTITIES,
            params={"upsert": "true"},
            json={"name": "Bob", "type": "person", "aliases": ["Bobby"]},
            headers=tenant_a.headers,
        )
        await client.delete(f"{RELATIONS}/{rel['id']}", headers=tenant_a.headers)
        await client.delete(f"{ENTITIES}/{b['id']}", headers=tenant_a.headers)

        ours = ("entity.", "relation.", "memory.link_entities", "memory.unlink_entity")
        actions = [x for x in await audit_actions(api, tenant_a) if x[0].startswith(ours)]

        assert actions == [
            ("entity.create", a["id"]),
            ("entity.create", b["id"]),
            ("relation.create", rel["id"]),
            ("memory.link_entities", m["id"]),
            ("memory.unlink_entity", m["id"]),
            ("entity.update", a["id"]),
            ("entity.update", b["id"]),
            ("relation.delete", rel["id"]),
            ("entity.delete", b["id"]),
        ]

    async def test_entity_names_stay_out_of_the_audit_log(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        await entity(client, tenant_a, "Zanzibar Quixote", description="Private person")

        async with api._db.tenant_tx(tenant_a.id) as tx:
            details = [
                str(a.detail)
                for a in await tx.session.scalars(select(AuditEntry).where(AuditEntry.tenant_id == tenant_a.id))
            ]

        assert not any("Zanzibar" in d or "Private" in d for d in details)


# ---- isolation ------------------------------------------------------------------------------


class TestIsolation:
    async def test_other_tenant_sees_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        alice, bob = await entity(client, tenant_a, "Alice"), await entity(client, tenant_a, "Bob")
        rel = await relate(client, tenant_a, alice, "knows", bob)
        m = await memory(client, tenant_a, "Alice knows Bob")
        await link(client, tenant_a, m["id"], alice["id"])
        h = tenant_b.headers
        url = f"{ENTITIES}/{alice['id']}"

        problem(await client.get(url, headers=h), 404, "entity_not_found")
        problem(await client.patch(url, json={"name": "Mallory"}, headers=h), 404, "entity_not_found")
        problem(await client.delete(url, headers=h), 404, "entity_not_found")
        assert await listed(client, tenant_b) == []
        assert await listed(client, tenant_b, q="ali") == []
        assert await listed(client, tenant_b, RELATIONS) == []
        assert await listed(client, tenant_b, RELATIONS, entity_id=alice["id"]) == []
        problem(await client.delete(f"{RELATIONS}/{rel['id']}", headers=h), 404, "relation_not_found")
        body = {"source_id": alice["id"], "type": "knows", "target_id": bob["id"]}
        problem(await client.post(RELATIONS, json=body, headers=h), 404, "entity_not_found")
        problem(await link(client, tenant_b, m["id"], alice["id"]), 404, "memory_not_found")
        problem(await client.delete(f"{MEMORIES}/{m['id']}/entities/{alice['id']}", headers=h), 404, "memory_not_found")

        # B's own memory and entities cannot reach A's either.
        mallory = await entity(client, tenant_b, "Mallory")
        own = await memory(client, tenant_b, "Mallory's note")
        problem(await link(client, tenant_b, own["id"], alice["id"]), 404, "entity_not_found")
        body = {"source_id": mallory["id"], "type": "knows", "target_id": alice["id"]}
        problem(await client.post(RELATIONS, json=body, headers=h), 404, "entity_not_found")
        # Same name in B is a different entity, not a conflict with A's.
        await entity(client, tenant_b, "Alice")

        g = await graph(client, tenant_a, alice["id"])
        assert (g["entity"]["name"], distances(g), [x["id"] for x in g["memories"]]) == ("Alice", {"Bob": 1}, [m["id"]])

    async def test_namespace_limited_key_is_403_elsewhere(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await create_namespace(client, tenant_a, "other")
        r = await client.post(
            "/v1/keys",
            json={"name": "other only", "scopes": ["read", "write"], "namespaces": ["other"]},
            headers=tenant_a.headers,
        )
        assert r.status_code == 201, r.text
        limited = {"Authorization": f"Bearer {r.json()['key']}"}
        alice, bob = await entity(client, tenant_a, "Alice"), await entity(client, tenant_a, "Bob")
        rel = await relate(client, tenant_a, alice, "knows", bob)
        m = await memory(client, tenant_a, "Alice knows Bob")

        calls = [
            ("POST", ENTITIES, {"name": "X"}),
            ("GET", ENTITIES, None),
            ("GET", f"{ENTITIES}/{alice['id']}", None),
            ("PATCH", f"{ENTITIES}/{alice['id']}", {"name": "X"}),
            ("DELETE", f"{ENTITIES}/{alice['id']}", None),
            ("POST", RELATIONS, {"source_id": alice["id"], "type": "knows", "target_id": bob["id"]}),
            ("GET", RELATIONS, None),
            ("DELETE", f"{RELATIONS}/{rel['id']}", None),
            ("POST", f"{MEMORIES}/{m['id']}/entities", {"entity_ids": [alice["id"]]}),
            ("DELETE", f"{MEMORIES}/{m['id']}/entities/{alice['id']}", None),
        ]
        for method, url, body in calls:
            problem(await client.request(method, url, json=body, headers=limited), 403, "forbidden")

        r = await client.post("/v1/namespaces/other/entities", json={"name": "Alice"}, headers=limited)
        assert r.status_code == 201, r.text

    async def test_read_only_key_cannot_write(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post("/v1/keys", json={"name": "reader", "scopes": ["read"]}, headers=tenant_a.headers)
        reader = {"Authorization": f"Bearer {r.json()['key']}"}
        alice = await entity(client, tenant_a, "Alice")

        assert (await client.get(f"{ENTITIES}/{alice['id']}", headers=reader)).status_code == 200
        problem(await client.post(ENTITIES, json={"name": "X"}, headers=reader), 403, "forbidden")
        problem(await client.delete(f"{ENTITIES}/{alice['id']}", headers=reader), 403, "forbidden")


# ---- bad input ------------------------------------------------------------------------------


class TestBadInput:
    @pytest.mark.parametrize(
        ("method", "url"),
        [
            ("POST", ENTITIES),
            ("PATCH", f"{ENTITIES}/{MISSING_ID}"),
            ("POST", RELATIONS),
            ("POST", f"{MEMORIES}/{MISSING_ID}/entities"),
        ],
    )
    @pytest.mark.parametrize("raw", [b"{not json", b"", b"null", b"[1, 2]", b'"text"', b"\xff\xfe"])
    async def test_body_that_is_not_a_json_object(
        self, client: httpx.AsyncClient, tenant_a: Tenant, method: str, url: str, raw: bytes
    ) -> None:
        headers = {**tenant_a.headers, "content-type": "application/json"}

        problem(await client.request(method, url, content=raw, headers=headers), 422, "validation_error")

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({}, "name"),
            ({"name": ""}, "name"),
            ({"name": "   "}, "name"),
            ({"name": 42}, "name"),
            ({"name": "a\u0000b"}, "name"),
            ({"name": "x" * 201}, "name"),
            ({"name": "A", "type": "alien"}, "type"),
            ({"name": "A", "aliases": "Al"}, "aliases"),
            ({"name": "A", "aliases": ["ok", ""]}, "aliases[1]"),
            ({"name": "A", "aliases": ["a\u0000"]}, "aliases[0]"),
            ({"name": "A", "aliases": [f"alias {i}" for i in range(51)]}, "aliases"),
            ({"name": "A", "description": "d" * 4001}, "description"),
            ({"name": "A", "description": "d\u0000"}, "description"),
            ({"name": "A", "metadata": [1]}, "metadata"),
            ({"name": "A", "metadata": {"k": "v\u0000"}}, "metadata"),
            ({"name": "A", "colour": "blue"}, "colour"),
        ],
    )
    async def test_invalid_entity_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, body: dict[str, Any], field: str
    ) -> None:
        r = await client.post(ENTITIES, json=body, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == field
        assert await listed(client, tenant_a) == []

    @pytest.mark.parametrize("upsert", ["maybe", "2"])
    async def test_bad_upsert_flag_is_422(self, client: httpx.AsyncClient, tenant_a: Tenant, upsert: str) -> None:
        r = await client.post(ENTITIES, params={"upsert": upsert}, json={"name": "A"}, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == "upsert"

    @pytest.mark.parametrize(
        ("method", "path", "field"),
        [
            ("GET", "entities/not-a-uuid", "entity_id"),
            ("PATCH", "entities/123", "entity_id"),
            ("DELETE", "entities/00000000-0000-0000-0000-00000000000g", "entity_id"),
            ("DELETE", "relations/nope", "relation_id"),
            ("POST", "memories/nope/entities", "memory_id"),
            ("DELETE", f"memories/{MISSING_ID}/entities/nope", "entity_id"),
        ],
    )
    async def test_bad_uuid_in_path_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, method: str, path: str, field: str
    ) -> None:
        body = {"name": "X"} if method == "PATCH" else ({"entity_ids": [MISSING_ID]} if method == "POST" else None)

        r = await client.request(method, f"{NS}/{path}", json=body, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == field

    @pytest.mark.parametrize("ns", ["bad%20name", "-leading-dash", "a" * 64, ".hidden"])
    async def test_invalid_namespace_in_path_is_422(self, client: httpx.AsyncClient, tenant_a: Tenant, ns: str) -> None:
        for method, suffix, body in (("GET", "entities", None), ("POST", "relations", {})):
            r = await client.request(method, f"/v1/namespaces/{ns}/{suffix}", json=body, headers=tenant_a.headers)

            assert problem(r, 422, "validation_error")["field"] == "ns"

    async def test_missing_key_is_401(self, client: httpx.AsyncClient) -> None:
        problem(await client.get(ENTITIES), 401, "missing_credentials")
