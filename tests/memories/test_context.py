"""POST /v1/namespaces/{ns}/context: a prompt-ready block packed into a token budget by rank,
grouped by type, that never drops the top memory, reads through the scope chain, and shows
nothing of another tenant."""

from __future__ import annotations

import httpx
import pytest

from memvault.retrieval.context import estimate_tokens
from tests.conftest import Tenant
from tests.memories.test_router import problem

NS = "/v1/namespaces/default"


async def store(client: httpx.AsyncClient, t: Tenant, content: str, **f: object) -> dict:
    r = await client.post(f"{NS}/memories", json={"content": content, **f}, headers=t.headers)
    assert r.status_code == 201, r.text
    return r.json()


async def context(client: httpx.AsyncClient, t: Tenant, **body: object) -> dict:
    r = await client.post(f"{NS}/context", json=body, headers=t.headers)
    assert r.status_code == 200, r.text
    return r.json()


class TestContext:
    async def test_grouped_by_type_with_dates_and_ids(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        pref = await store(client, tenant_a, "Ana prefers aisle seats", type="preference", user_id="ana")
        dec = await store(client, tenant_a, "We fly with TAP to Lisbon", type="decision", user_id="ana")
        out = await context(client, tenant_a, query="Ana's flight to Lisbon", user_id="ana")
        block = out["context"]
        assert "### Preferences" in block and "### Decisions" in block
        assert "- Ana prefers aisle seats (" in block and pref["id"][:8] in block
        assert set(out["memory_ids"]) == {pref["id"], dec["id"]}
        assert out["tokens"] == estimate_tokens(block) <= out["token_budget"] == 1500
        assert (out["truncated"], out["omitted"]) == (False, 0)

    async def test_budget_keeps_the_best_ranked_and_never_drops_the_top(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        top = await store(client, tenant_a, "The zorblax adapter connects the sensor to the hub")
        for i in range(8):
            await store(client, tenant_a, f"Unrelated office note number {i} about the kitchen rota")
        small = await context(client, tenant_a, query="zorblax adapter", token_budget=60)
        assert small["memory_ids"][0] == top["id"]
        assert small["tokens"] <= 60 and small["omitted"] > 0

        long_text = "The zorblax adapter " + "needs careful calibration " * 200
        big = await store(client, tenant_a, long_text, key="calibration")
        tiny = await context(client, tenant_a, query="zorblax calibration", token_budget=80)
        assert tiny["memory_ids"] == [big["id"]] and tiny["truncated"] is True
        assert tiny["tokens"] <= 80 and tiny["context"].count("…") == 1

    async def test_session_recall_reads_the_scope_chain(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await store(client, tenant_a, "Answer in Portuguese", type="instruction", session_id="s1")
        await store(client, tenant_a, "Bob's session note", session_id="s2")
        out = await context(client, tenant_a, session_id="s1")
        assert "Answer in Portuguese" in out["context"] and "Bob's session note" not in out["context"]

    async def test_nothing_stored_says_so(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        out = await context(client, tenant_a, query="anything at all")
        assert out["memory_ids"] == [] and "Nothing relevant is stored yet." in out["context"]

    @pytest.mark.parametrize(
        "body",
        [{}, {"token_budget": 1500}, {"query": ""}, {"query": "x", "token_budget": 10}, {"query": "x", "extra": 1}],
    )
    async def test_bad_input(self, client: httpx.AsyncClient, tenant_a: Tenant, body: dict) -> None:
        problem(await client.post(f"{NS}/context", json=body, headers=tenant_a.headers), 422, "validation_error")

    async def test_other_tenant_sees_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        await store(client, tenant_a, "Tenant A's secret launch codename is Falcon")
        out = await context(client, tenant_b, query="launch codename")
        assert out["memory_ids"] == [] and "Falcon" not in out["context"]
