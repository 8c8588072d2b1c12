"""Values at the edge of what the database and Python's dates hold must not break a search: tiny
importance and confidence (single-precision underflow), time cues past year 9999 or before year 1."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import text

from memvault.api import NamespaceAPI
from tests.conftest import Tenant
from tests.memories.test_router import problem

NS = "/v1/namespaces/default"


async def store(client: httpx.AsyncClient, tenant: Tenant, **body: Any) -> dict[str, Any]:
    r = await client.post(f"{NS}/memories", json=body, headers=tenant.headers)
    assert r.status_code == 201, r.text
    return r.json()


class TestTinyWeights:
    @pytest.mark.parametrize("field", ["importance", "confidence"])
    @pytest.mark.parametrize("value", [1e-300, 1e-39, 5e-45])
    async def test_below_single_precision_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, field: str, value: float
    ) -> None:
        r = await client.post(f"{NS}/memories", json={"content": "x", field: value}, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == field
        assert (await client.get(f"{NS}/memories", headers=tenant_a.headers)).json()["data"] == []

    async def test_the_smallest_normal_value_and_zero_are_kept(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        m = await store(client, tenant_a, content="tiny weights", importance=1.2e-38, confidence=0)

        assert (m["importance"], m["confidence"]) == (pytest.approx(1.2e-38), 0)
        r = await client.patch(f"{NS}/memories/{m['id']}", json={"importance": 1e-300}, headers=tenant_a.headers)
        assert problem(r, 422, "validation_error")["field"] == "importance"

    async def test_a_stored_tiny_value_does_not_break_search(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        # What a row written before the edge check (or by an import, or an operator) may hold.
        m = await store(client, tenant_a, content="The zorblax adapter connects the sensor to the hub")
        async with api._db.owner() as s:
            await s.execute(
                text("UPDATE memories SET importance = 1e-30, confidence = 1e-30 WHERE id = :id"), {"id": m["id"]}
            )

        for fusion in ("weighted", "rrf"):
            body = {"query": "zorblax adapter", "weights": {"importance": 1.0}, "fusion": fusion}
            r = await client.post(f"{NS}/search", json=body, headers=tenant_a.headers)
            assert r.status_code == 200, r.text
            assert [hit["memory"]["id"] for hit in r.json()["results"]] == [m["id"]]
        r = await client.post(f"{NS}/context", json={"query": "zorblax adapter"}, headers=tenant_a.headers)
        assert r.status_code == 200, r.text
        assert "zorblax" in r.json()["context"]


class TestTimeCuesAtTheEdgeOfTime:
    @pytest.mark.parametrize(
        ("query", "reference_time"),
        [
            ("what happened in December 9999", None),
            ("what happened on 31 December 9999", None),
            ("what did we do last week", "0001-01-01T00:00:00Z"),
            ("what did we do last week", "9999-12-31T00:00:00Z"),
            ("what happened this year", "9999-12-31T23:59:59Z"),
            ("three years ago", "0002-01-01T00:00:00Z"),
        ],
    )
    async def test_search_answers(
        self, client: httpx.AsyncClient, tenant_a: Tenant, query: str, reference_time: str | None
    ) -> None:
        await store(client, tenant_a, content="We shipped the release on Friday")
        body: dict[str, Any] = {"query": query}
        if reference_time:
            body["reference_time"] = reference_time

        r = await client.post(f"{NS}/search", json=body, headers=tenant_a.headers)

        assert r.status_code == 200, r.text
        r = await client.post(f"{NS}/context", json={"query": query}, headers=tenant_a.headers)
        assert r.status_code == 200, r.text

    @pytest.mark.parametrize("valid_from", ["1700-01-01T00:00:00Z", "0001-01-01T00:00:00Z"])
    async def test_a_very_old_memory_does_not_break_plain_searches(
        self, client: httpx.AsyncClient, tenant_a: Tenant, valid_from: str
    ) -> None:
        # Schemathesis found it: one memory dated centuries ago made every later search of its
        # namespace a 500 (exp() in the recency decay underflowed in PostgreSQL).
        await store(client, tenant_a, content="Old news about window seats", valid_from=valid_from)
        await store(client, tenant_a, content="New news about window seats")

        r = await client.post(f"{NS}/search", json={"query": "window seats"}, headers=tenant_a.headers)

        assert r.status_code == 200, r.text
        assert len(r.json()["results"]) == 2
        r = await client.post(f"{NS}/context", json={"query": "window seats"}, headers=tenant_a.headers)
        assert r.status_code == 200, r.text
