"""Preferences and facts as tools through the real MCP client: keyed memories superseded by a
later one about the same thing, validity times, links and relations to known entities."""

from __future__ import annotations

from tests.conftest import Tenant
from tests.mcp.conftest import call, fails, mcp_session


class TestPreferences:
    async def test_a_second_preference_of_a_category_supersedes_the_first(
        self, base_url: str, tenant_a: Tenant
    ) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            first = await call(
                s,
                "memory_add_preference",
                category="Seating",
                preference="window seats on long flights",
                context="when booking flights",
                confidence=0.8,
                user_id="ana",
            )
            assert first["type"] == "preference" and first["key"] == "preference:seating"
            assert first["scope"] == "user" and first["user_id"] == "ana"
            assert first["confidence"] == 0.8
            assert "window seats on long flights" in first["content"] and "when booking flights" in first["content"]

            # Another spelling of the same category is the same key.
            second = await call(
                s, "memory_add_preference", category="seating ", preference="aisle seats", user_id="ana"
            )

            assert second["key"] == "preference:seating" and second["supersedes"] == first["id"]
            history = await call(s, "memory_history", memory_id=second["id"])
            assert history["current_id"] == second["id"]
            assert [v["id"] for v in history["versions"]] == [first["id"], second["id"]]
            listed = await call(s, "memory_list", user_id="ana", types=["preference"])
            assert [m["id"] for m in listed["data"]] == [second["id"]]

    async def test_preferences_of_other_users_do_not_supersede_each_other(
        self, base_url: str, tenant_a: Tenant
    ) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            ana = await call(s, "memory_add_preference", category="diet", preference="vegetarian", user_id="ana")
            bob = await call(s, "memory_add_preference", category="diet", preference="no nuts", user_id="bob")

            assert bob.get("supersedes") is None
            assert (await call(s, "memory_get", memory_id=ana["id"]))["superseded_at"] is None

    async def test_bad_input_is_a_validation_error(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            out_of_range = await fails(s, "memory_add_preference", category="diet", preference="x", confidence=1.5)
            assert out_of_range.startswith("validation_error")
            blank = await fails(s, "memory_add_preference", category="  ", preference="vegetarian")
            assert blank.startswith("validation_error") and "category" in blank


class TestFacts:
    async def test_a_fact_with_the_same_subject_and_predicate_supersedes(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            first = await call(
                s,
                "memory_add_fact",
                subject="Ana",
                predicate="lives in",
                object="Oslo",
                valid_from="2020-01-01T00:00:00Z",
                confidence=0.9,
            )
            memory = first["memory"]
            assert memory["type"] == "fact" and memory["key"] == "fact:ana:lives_in"
            assert memory["content"] == "Ana lives in Oslo" and memory["confidence"] == 0.9
            assert memory["valid_from"].startswith("2020-01-01") and memory["valid_to"] is None
            assert first["relation"] is None  # no entities known

            second = await call(
                s,
                "memory_add_fact",
                subject="ana",
                predicate="lives_in",
                object="Bergen",
                valid_from="2024-06-01T00:00:00Z",
                valid_until="2030-01-01T00:00:00Z",
            )

            now = second["memory"]
            assert now["supersedes"] == memory["id"]
            assert now["valid_from"].startswith("2024-06-01") and now["valid_to"].startswith("2030-01-01")
            old = await call(s, "memory_get", memory_id=memory["id"])
            assert old["superseded_by"] == now["id"] and old["valid_to"].startswith("2024-06-01")
            found = await call(s, "memory_search", query="where does Ana live?")
            assert [r["id"] for r in found["results"]][:1] == [now["id"]]

    async def test_a_fact_between_known_entities_relates_them(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            ana = await call(s, "entity_add", name="Ana Lima", type="person", aliases=["Ana"])
            acme = await call(s, "entity_add", name="Acme", type="organization")
            globex = await call(s, "entity_add", name="Globex", type="organization")

            fact = await call(
                s, "memory_add_fact", subject="ana", predicate="works at", object="ACME", valid_from="2021-03-01"
            )

            relation = fact["relation"]
            assert relation["source_id"] == ana["id"] and relation["target_id"] == acme["id"]
            assert relation["type"] == "works_at" and relation["valid_from"].startswith("2021-03-01")
            graph = await call(s, "entity_get", entity_id=ana["id"])
            assert [r["id"] for r in graph["relations"]] == [relation["id"]]
            assert fact["memory"]["id"] in [m["id"] for m in graph["memories"]]

            # The same fact again adds no second relation.
            again = await call(
                s, "memory_add_fact", subject="Ana", predicate="works_at", object="Acme", valid_from="2021-03-01"
            )
            assert again["relation"]["id"] == relation["id"]

            # A new employer: the old relation ends where the new one starts.
            moved = await call(
                s, "memory_add_fact", subject="Ana", predicate="works_at", object="Globex", valid_from="2025-01-01"
            )
            assert moved["relation"]["target_id"] == globex["id"]
            now = await call(s, "entity_get", entity_id=ana["id"], valid_at="2025-06-01T00:00:00Z")
            assert [r["target_id"] for r in now["relations"]] == [globex["id"]]
            then = await call(s, "entity_get", entity_id=ana["id"], valid_at="2022-06-01T00:00:00Z")
            assert [r["target_id"] for r in then["relations"]] == [acme["id"]]

    async def test_a_users_private_fact_links_but_adds_no_shared_relation(
        self, base_url: str, tenant_a: Tenant
    ) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            ana = await call(s, "entity_add", name="Ana", type="person")
            await call(s, "entity_add", name="Oslo", type="location")

            fact = await call(s, "memory_add_fact", subject="Ana", predicate="lives_in", object="Oslo", user_id="ana")

            assert fact["memory"]["scope"] == "user" and fact["relation"] is None
            graph = await call(s, "entity_get", entity_id=ana["id"])
            assert graph["relations"] == []

    async def test_bad_input_is_a_validation_error(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            bad = await fails(s, "memory_add_fact", subject="Ana", predicate="age", object="41", confidence=-0.1)
            assert bad.startswith("validation_error")
            backwards = await fails(
                s,
                "memory_add_fact",
                subject="Ana",
                predicate="age",
                object="41",
                valid_from="2025-01-01T00:00:00Z",
                valid_until="2024-01-01T00:00:00Z",
            )
            assert backwards.startswith("validation_error") and "valid_until" in backwards


class TestTenants:
    async def test_a_fact_never_relates_another_tenants_entities(
        self, base_url: str, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        async with mcp_session(base_url, tenant_a.key) as a:
            await call(a, "entity_add", name="Ana", type="person")
            await call(a, "entity_add", name="Acme", type="organization")
        async with mcp_session(base_url, tenant_b.key) as b:
            fact = await call(b, "memory_add_fact", subject="Ana", predicate="works_at", object="Acme")
            assert fact["relation"] is None
            assert (await call(b, "memory_list"))["data"][0]["id"] == fact["memory"]["id"]
        async with mcp_session(base_url, tenant_a.key) as a:
            assert (await call(a, "memory_list"))["data"] == []
