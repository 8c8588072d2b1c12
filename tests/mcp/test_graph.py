"""The entity graph's tools through the real MCP client over HTTP: lookup by alias, storing and
searching by entity, UPPER_SNAKE relations, paths, related entities, the export, errors as tool
results, and tenant isolation."""

from __future__ import annotations

from typing import Any

from mcp.client.session import ClientSession

from tests.conftest import Tenant
from tests.mcp.conftest import call, fails, mcp_session


async def people(s: ClientSession) -> dict[str, dict[str, Any]]:
    """Ana works at Acme, as does Bob; Bob's sister is Cleo."""
    made = {
        "ana": await call(s, "entity_add", name="Ana Silva", type="person", aliases=["Ani"]),
        "bob": await call(s, "entity_add", name="Bob", type="person"),
        "cleo": await call(s, "entity_add", name="Cleo", type="person"),
        "acme": await call(s, "entity_add", name="Acme", type="organization"),
    }
    for source, type_, target in (
        ("ana", "WORKS_AT", "acme"),
        ("bob", "works_at", "acme"),
        ("bob", "SISTER_OF", "cleo"),
    ):
        rel = await call(s, "entity_relate", source_id=made[source]["id"], type=type_, target_id=made[target]["id"])
        assert rel["type"] == type_.lower()
    return made


class TestGraphTools:
    async def test_lookup_store_and_search_by_entity(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            made = await people(s)

            found = await call(s, "memory_find_entity", name="ani")
            assert [e["id"] for e in found["data"]] == [made["ana"]["id"]]
            assert (await call(s, "memory_find_entity", name="Ani", type="organization"))["data"] == []

            linked = await call(s, "memory_store", content="Ana leads the rocket team at Acme", entity="Ani")
            by_id = await call(s, "memory_store", content="Bob sells rockets at Acme", entity=made["bob"]["id"])
            assert [m["id"] for m in (await call(s, "entity_get", entity_id=made["ana"]["id"]))["memories"]] == [
                linked["id"]
            ]

            for ref in ("Ana Silva", "ANI", made["ana"]["id"]):
                hits = await call(s, "memory_search", query="rockets at Acme", entity=ref)
                assert [h["id"] for h in hits["results"]] == [linked["id"]], ref
            hits = await call(s, "memory_search", query="rockets at Acme", entity="bob")
            assert [h["id"] for h in hits["results"]] == [by_id["id"]]

            assert (await fails(s, "memory_search", query="x", entity="Nobody")).startswith("entity_not_found")
            assert (await fails(s, "memory_store", content="x", entity="Nobody")).startswith("entity_not_found")

    async def test_paths_related_and_export(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            made = await people(s)
            await call(s, "memory_store", content="Cleo visits Acme on Fridays", entity="Cleo", user_id="cleo")

            paths = await call(s, "entity_paths", source="Ani", target="Cleo")
            assert [p["text"] for p in paths["paths"]] == [
                "Ana Silva -[works_at]-> Acme <-[works_at]- Bob -[sister_of]-> Cleo"
            ]
            assert [
                p["text"] for p in (await call(s, "entity_paths", source="Ani", target="Cleo", max_depth=2))["paths"]
            ] == []

            related = await call(s, "entity_related", entity="Acme", relation="WORKS_AT", type="person")
            assert [(r["entity"]["name"], r["direction"]) for r in related["data"]] == [
                ("Ana Silva", "in"),
                ("Bob", "in"),
            ]

            whole = await call(s, "memory_export_graph")
            assert {n["label"] for n in whole["nodes"] if n["kind"] == "entity"} == {"Ana Silva", "Bob", "Cleo", "Acme"}
            assert whole["counts"]["relations"] == 3 and whole["counts"]["memories"] == 0
            cleo = await call(s, "memory_export_graph", user_id="cleo")
            assert [(n["kind"], n["label"]) for n in cleo["nodes"]] == [
                ("entity", "Cleo"),
                ("memory", "Cleo visits Acme on Fridays"),
            ]
            assert [(e["kind"], e["target"]) for e in cleo["edges"]] == [("mention", made["cleo"]["id"])]

            assert "max_depth" in await fails(s, "entity_paths", source="Ani", target="Cleo", max_depth=5)
            assert (await fails(s, "entity_related", entity="Nobody")).startswith("entity_not_found")


class TestIsolation:
    async def test_tenant_b_cannot_look_up_export_or_query_a(
        self, base_url: str, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        async with mcp_session(base_url, tenant_a.key) as a:
            made = await people(a)
            await call(a, "memory_store", content="Ana leads the rocket team", entity="Ani")
        ana, acme = made["ana"]["id"], made["acme"]["id"]
        async with mcp_session(base_url, tenant_b.key) as b:
            assert (await call(b, "memory_find_entity", name="Ana Silva"))["data"] == []
            assert (await call(b, "memory_export_graph"))["nodes"] == []
            assert (await fails(b, "entity_paths", source=ana, target=acme)).startswith("entity_not_found")
            assert (await fails(b, "entity_related", entity=ana)).startswith("entity_not_found")
            assert (await fails(b, "memory_search", query="rocket team", entity=ana)).startswith("entity_not_found")
            assert (await fails(b, "memory_store", content="x", entity=ana)).startswith("entity_not_found")
