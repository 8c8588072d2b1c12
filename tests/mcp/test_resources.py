"""The overview resources through the real MCP client: memory://stats, memory://graph/stats,
memory://entities, memory://preferences and memory://memories/{id} across namespaces, each read as
the caller's credential, never showing another tenant's data."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from memvault.api import NamespaceAPI
from memvault.keys.schemas import KeyIn
from memvault.namespaces.schemas import NamespaceIn
from tests.conftest import Tenant
from tests.mcp.conftest import call, mcp_session


async def read(s: ClientSession, uri: str) -> Any:
    out = await s.read_resource(uri)
    return json.loads(out.contents[0].text)  # type: ignore[union-attr]


async def fill(s: ClientSession) -> dict[str, Any]:
    """Two preferences (one replaced by a newer version), a fact, two entities and a relation."""
    await call(s, "memory_store", content="Prefers tea", type="preference", key="drink", user_id="ana")
    tea = await call(s, "memory_store", content="Prefers green tea", type="preference", key="drink", user_id="ana")
    seat = await call(s, "memory_store", content="Likes aisle seats", type="preference", user_id="ana")
    fact = await call(s, "memory_store", content="Ana lives in Porto", type="fact", user_id="ana")
    ana = await call(s, "entity_add", name="Ana", type="person")
    porto = await call(s, "entity_add", name="Porto", type="location")
    await call(s, "entity_relate", source_id=ana["id"], type="lives_in", target_id=porto["id"])
    return {"tea": tea, "seat": seat, "fact": fact}


class TestOverview:
    async def test_stats_count_by_type_with_the_namespaces_own_share(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            await fill(s)
            stats = await read(s, "memory://stats")
        ns = stats["namespaces"]["default"]
        # The replaced version of "drink" is history, not a current memory; it still takes room.
        assert ns["memories"]["by_type"] == {"fact": 1, "preference": 2}
        assert ns["memories"]["current"] == 3 and ns["memories"]["by_state"] == {"stable": 3}
        assert ns["entities"] == 2 and ns["relations"] == 1
        assert ns["index"]["rows"] == 4 and ns["index"]["vectors"] == 4 and ns["index"]["bytes"] > 4 * 384

    async def test_graph_stats_entities_preferences(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            stored = await fill(s)
            graph = await read(s, "memory://graph/stats")
            entities = await read(s, "memory://entities")
            prefs = await read(s, "memory://preferences")
        assert graph["namespaces"]["default"] == {
            "entities": {"total": 2, "by_type": {"location": 1, "person": 1}},
            "relations": {"total": 1, "by_type": {"lives_in": 1}},
        }
        assert sorted(e["name"] for e in entities["entities"]) == ["Ana", "Porto"]
        assert entities["truncated"] is False
        # Current preferences only: the superseded "Prefers tea" and the fact are not listed.
        assert [m["id"] for m in prefs["preferences"]] == [stored["seat"]["id"], stored["tea"]["id"]]
        assert prefs["truncated"] is False

    async def test_a_memory_is_found_in_any_namespace_the_key_reaches(
        self, api: NamespaceAPI, base_url: str, tenant_a: Tenant
    ) -> None:
        await api.create_namespace(tenant_a.principal, NamespaceIn(name="work"))
        async with mcp_session(base_url, tenant_a.key) as s:
            other = await call(s, "memory_store", content="Sprint ends Friday", namespace="work")
            one = await read(s, f"memory://memories/{other['id']}")
            assert one["content"] == "Sprint ends Friday" and one["namespace"] == "work"
            stats = await read(s, "memory://stats")
            assert set(stats["namespaces"]) == {"default", "work"}
        # A tenant-wide memory belongs to no namespace; it is found too, and listed once.
        async with mcp_session(base_url, tenant_a.key) as s:
            shared = await call(s, "memory_store", content="Prefers metric units", type="preference", scope="tenant")
            assert (await read(s, f"memory://memories/{shared['id']}"))["scope"] == "tenant"
            prefs = (await read(s, "memory://preferences"))["preferences"]
            assert [m["id"] for m in prefs] == [shared["id"]]
        # A key limited to `default` does not find it, and is told no more than "not found".
        limited = await api.create_key(tenant_a.principal, KeyIn(name="limited", namespaces=["default"]))
        async with mcp_session(base_url, limited.key) as s:
            with pytest.raises(MCPError, match="memory_not_found"):
                await s.read_resource(f"memory://memories/{other['id']}")
            assert set((await read(s, "memory://stats"))["namespaces"]) == {"default"}

    async def test_another_tenant_sees_none_of_it(self, base_url: str, tenant_a: Tenant, tenant_b: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            stored = await fill(s)
        async with mcp_session(base_url, tenant_b.key) as s:
            for m in stored.values():
                with pytest.raises(MCPError, match="memory_not_found"):
                    await s.read_resource(f"memory://memories/{m['id']}")
            stats = await read(s, "memory://stats")
            assert stats["namespaces"]["default"]["memories"]["current"] == 0
            assert stats["namespaces"]["default"]["index"] == {"rows": 0, "vectors": 0, "bytes": 0}
            graph = await read(s, "memory://graph/stats")
            assert graph["namespaces"]["default"]["entities"]["total"] == 0
            assert (await read(s, "memory://entities"))["entities"] == []
            assert (await read(s, "memory://preferences"))["preferences"] == []

    async def test_a_bad_id_and_a_missing_memory_are_errors_with_our_code(
        self, base_url: str, tenant_a: Tenant
    ) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            with pytest.raises(MCPError, match="validation_error: not a memory id") as bad:
                await s.read_resource("memory://memories/not-an-id")
            assert bad.value.code == INVALID_PARAMS
            with pytest.raises(MCPError, match="memory_not_found") as missing:
                await s.read_resource("memory://memories/00000000-0000-4000-8000-000000000000")
            assert missing.value.code == INVALID_PARAMS
