"""Contradictions through the real MCP client: marked between two memories, shown on search hits
until resolved, resolved by keeping one (the other archived) or both, and kept to the tenant."""

from __future__ import annotations

from typing import Any

from mcp.client.session import ClientSession

from tests.conftest import Tenant
from tests.mcp.conftest import call, fails, mcp_session

MISSING_ID = "00000000-0000-4000-8000-000000000000"


async def two_memories(s: ClientSession) -> tuple[dict[str, Any], dict[str, Any]]:
    oslo = await call(s, "memory_store", content="Ana lives in Oslo")
    bergen = await call(s, "memory_store", content="Ana lives in Bergen")
    return oslo, bergen


def hit(found: dict[str, Any], memory_id: str) -> dict[str, Any]:
    """A search hit by memory id; a hit carries `contradicted_by` only when something contradicts it."""
    found_hit = next(r for r in found["results"] if r["id"] == memory_id)
    return {"contradicted_by": [], **found_hit}


class TestLifecycle:
    async def test_marked_surfaced_resolved_no_longer_surfaced(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            oslo, bergen = await two_memories(s)
            before = await call(s, "memory_search", query="where does Ana live?")
            assert hit(before, oslo["id"])["contradicted_by"] == []

            mark = await call(
                s, "memory_mark_contradiction", memory_id=oslo["id"], other_id=bergen["id"], note="which city?"
            )
            assert mark["state"] == "open" and mark["note"] == "which city?" and mark["resolution"] is None

            found = await call(s, "memory_search", query="where does Ana live?")
            assert hit(found, oslo["id"])["contradicted_by"] == [bergen["id"]]
            assert hit(found, bergen["id"])["contradicted_by"] == [oslo["id"]]
            # Marking the pair again, either way round, is the same open mark.
            again = await call(s, "memory_mark_contradiction", memory_id=bergen["id"], other_id=oslo["id"])
            assert again["id"] == mark["id"]

            done = await call(
                s, "memory_resolve_contradiction", contradiction_id=mark["id"], resolution="keep_both", note="moved"
            )

            assert done["state"] == "resolved" and done["resolution"] == "keep_both"
            assert done["resolution_note"] == "moved" and done["resolved_at"]
            after = await call(s, "memory_search", query="where does Ana live?")
            assert hit(after, oslo["id"])["contradicted_by"] == []
            assert hit(after, bergen["id"])["contradicted_by"] == []
            assert (await call(s, "memory_get", memory_id=oslo["id"]))["state"] == "stable"

    async def test_keeping_one_archives_the_other(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            oslo, bergen = await two_memories(s)
            await call(s, "memory_mark_contradiction", memory_id=oslo["id"], other_id=bergen["id"])

            # Named by the pair instead of the id.
            done = await call(
                s,
                "memory_resolve_contradiction",
                memory_id=bergen["id"],
                other_id=oslo["id"],
                resolution="keep_one",
                keep_id=bergen["id"],
            )

            assert done["kept_id"] == bergen["id"]
            assert (await call(s, "memory_get", memory_id=oslo["id"]))["state"] == "archived"
            assert (await call(s, "memory_get", memory_id=bergen["id"]))["state"] == "stable"
            found = await call(s, "memory_search", query="where does Ana live?")
            assert [r["id"] for r in found["results"]] == [bergen["id"]]
            assert found["results"][0].get("contradicted_by", []) == []
            history = await call(s, "memory_history", memory_id=oslo["id"])
            assert history["changes"][-1]["action"] == "archived"


class TestBadInput:
    async def test_refused_with_stable_codes(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            oslo, bergen = await two_memories(s)

            same = await fails(s, "memory_mark_contradiction", memory_id=oslo["id"], other_id=oslo["id"])
            assert same.startswith("validation_error")
            unknown = await fails(s, "memory_mark_contradiction", memory_id=oslo["id"], other_id=MISSING_ID)
            assert unknown.startswith("memory_not_found")
            no_such = await fails(
                s, "memory_resolve_contradiction", contradiction_id=MISSING_ID, resolution="keep_both"
            )
            assert no_such.startswith("contradiction_not_found")

            mark = await call(s, "memory_mark_contradiction", memory_id=oslo["id"], other_id=bergen["id"])
            no_keep = await fails(s, "memory_resolve_contradiction", contradiction_id=mark["id"], resolution="keep_one")
            assert no_keep.startswith("validation_error") and "keep_id" in no_keep
            stranger = await call(s, "memory_store", content="Ana likes tea")
            wrong_keep = await fails(
                s,
                "memory_resolve_contradiction",
                contradiction_id=mark["id"],
                resolution="keep_one",
                keep_id=stranger["id"],
            )
            assert wrong_keep.startswith("validation_error")
            neither = await fails(s, "memory_resolve_contradiction", memory_id=oslo["id"], resolution="keep_both")
            assert neither.startswith("validation_error")
            # Nothing of that changed the mark.
            found = await call(s, "memory_search", query="where does Ana live?")
            assert hit(found, oslo["id"])["contradicted_by"] == [bergen["id"]]


class TestTenants:
    async def test_another_tenant_can_neither_use_nor_see_nor_resolve(
        self, base_url: str, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        async with mcp_session(base_url, tenant_a.key) as a:
            oslo, bergen = await two_memories(a)
            mark = await call(a, "memory_mark_contradiction", memory_id=oslo["id"], other_id=bergen["id"])
        async with mcp_session(base_url, tenant_b.key) as b:
            own = await call(b, "memory_store", content="Ana lives in Oslo")

            refused = await fails(b, "memory_mark_contradiction", memory_id=own["id"], other_id=oslo["id"])
            assert refused.startswith("memory_not_found")
            resolve = await fails(
                b, "memory_resolve_contradiction", contradiction_id=mark["id"], resolution="keep_both"
            )
            assert resolve.startswith("contradiction_not_found")
            by_pair = await fails(
                b, "memory_resolve_contradiction", memory_id=oslo["id"], other_id=bergen["id"], resolution="keep_both"
            )
            assert by_pair.startswith("memory_not_found")
            found = await call(b, "memory_search", query="where does Ana live?")
            assert [(r["id"], r.get("contradicted_by", [])) for r in found["results"]] == [(own["id"], [])]
        async with mcp_session(base_url, tenant_a.key) as a:
            still = await call(a, "memory_search", query="where does Ana live?")
            assert hit(still, oslo["id"])["contradicted_by"] == [bergen["id"]]


class TestReaders:
    async def test_another_users_memory_is_not_named_on_a_hit(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            shared = await call(s, "memory_store", content="The team standup is at 9:00")
            private = await call(s, "memory_store", content="The team standup is at 9:30", user_id="ana")
            await call(s, "memory_mark_contradiction", memory_id=shared["id"], other_id=private["id"])

            as_ana = await call(s, "memory_search", query="when is the team standup?", user_id="ana")
            as_bob = await call(s, "memory_search", query="when is the team standup?", user_id="bob")

            assert hit(as_ana, shared["id"])["contradicted_by"] == [private["id"]]
            assert [(r["id"], r.get("contradicted_by", [])) for r in as_bob["results"]] == [(shared["id"], [])]
