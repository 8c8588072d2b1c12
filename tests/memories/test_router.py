"""The memory REST API as a client sees it: store, read, change, delete, list and search memories,
and every kind of bad input answered with problem JSON, never a 500.

Runs against the real app: embedded PostgreSQL, Redis and the MiniLM embedding model."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.conftest import Tenant

MEMORIES = "/v1/namespaces/default/memories"
BATCH = f"{MEMORIES}/batch"
SEARCH = "/v1/namespaces/default/search"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
MISSING_ID = "00000000-0000-4000-8000-000000000000"

# Memories on unrelated topics, sharing no words with the queries below, so only meaning can pick
# the right one.
COFFEE = "The user prefers dark roast coffee"
CAR = "The user drives a red electric hatchback"
SISTER = "The user's sister Alice lives in Lisbon and works as a nurse"
BUDGET = "The quarterly budget review moved to Thursday afternoon"
DISTRACTORS = [
    "Our team standup happens every morning at nine",
    "The production database runs PostgreSQL 16 on AWS",
    "The office wifi password was rotated last week",
    "Deploys to staging need approval from the release manager",
]
ZORBLAX = "The zorblax adapter connects the sensor to the hub"


def problem(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """Assert an RFC 9457 problem response carrying our stable code and the request id."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json"), r.headers["content-type"]
    body = r.json()
    assert {"type", "title", "status", "detail", "code", "request_id"} <= body.keys(), body
    assert body["status"] == status
    assert body["code"] == code, body
    assert body["type"].endswith(code)
    assert body["request_id"] == r.headers["x-request-id"]
    return body


async def store(client: httpx.AsyncClient, tenant: Tenant, content: str, **fields: Any) -> dict[str, Any]:
    r = await client.post(MEMORIES, json={"content": content, **fields}, headers=tenant.headers)
    assert r.status_code == 201, r.text
    return r.json()


async def store_many(client: httpx.AsyncClient, tenant: Tenant, contents: list[str]) -> list[dict[str, Any]]:
    r = await client.post(BATCH, json={"memories": [{"content": c} for c in contents]}, headers=tenant.headers)
    assert r.status_code == 201, r.text
    return r.json()["memories"]


async def get(client: httpx.AsyncClient, tenant: Tenant, memory_id: str) -> httpx.Response:
    return await client.get(f"{MEMORIES}/{memory_id}", headers=tenant.headers)


async def listed(client: httpx.AsyncClient, tenant: Tenant, params: Any = None) -> list[dict[str, Any]]:
    """One page of the list (big enough for any test here)."""
    r = await client.get(MEMORIES, params=params, headers=tenant.headers)
    assert r.status_code == 200, r.text
    return r.json()["data"]


async def search(client: httpx.AsyncClient, tenant: Tenant, query: str, **body: Any) -> dict[str, Any]:
    r = await client.post(SEARCH, json={"query": query, **body}, headers=tenant.headers)
    assert r.status_code == 200, r.text
    return r.json()


def ids(memories: list[dict[str, Any]]) -> list[str]:
    return [m["id"] for m in memories]


def result_ids(out: dict[str, Any]) -> list[str]:
    return [r["memory"]["id"] for r in out["results"]]


def at(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


# ---- create ---------------------------------------------------------------------------------


class TestCreate:
    async def test_returns_201_with_every_field(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        before = datetime.now(UTC)
        body = {
            "content": "The user prefers window seats on long flights",
            "type": "preference",
            "key": "seat-preference",
            "user_id": "user-1",
            "agent_id": "travel-agent",
            "session_id": "session-9",
            "metadata": {"source": "chat", "tags": ["travel", "flights"], "turn": 4},
            "importance": 0.8,
            "confidence": 0.9,
            "state": "tentative",
            "valid_from": "2024-01-01T00:00:00Z",
            "valid_to": "2030-01-01T00:00:00+02:00",
        }
        r = await client.post(MEMORIES, json=body, headers=tenant_a.headers)

        assert r.status_code == 201, r.text
        m = r.json()
        uuid.UUID(m["id"])
        assert m["namespace"] == "default"
        for name in ("content", "type", "key", "user_id", "agent_id", "session_id", "metadata", "state"):
            assert m[name] == body[name], name
        assert m["importance"] == pytest.approx(0.8)
        assert m["confidence"] == pytest.approx(0.9)
        assert at(m["valid_from"]) == datetime(2024, 1, 1, tzinfo=UTC)
        assert at(m["valid_to"]) == datetime(2029, 12, 31, 22, tzinfo=UTC)
        assert m["scope"] == "user"  # a memory with a user_id is that user's unless told otherwise
        assert m["embedding_model"] == MODEL
        assert len(m["content_hash"]) == 64
        int(m["content_hash"], 16)
        assert m["access_count"] == 0
        assert m["last_accessed_at"] is None
        assert m["superseded_at"] is None
        assert m["superseded_by"] is None
        assert m["created_by"].startswith("key:")
        for stamp in ("created_at", "updated_at", "recorded_at"):
            when = at(m[stamp])
            assert when is not None
            assert before - timedelta(seconds=5) <= when <= datetime.now(UTC) + timedelta(seconds=5), stamp

    async def test_only_content_is_required(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        m = await store(client, tenant_a, "The user lives in Berlin")

        assert m["type"] == "fact"
        assert m["state"] == "stable"
        assert m["importance"] == pytest.approx(0.5)
        assert m["confidence"] == pytest.approx(1.0)
        assert m["metadata"] == {}
        assert [m[f] for f in ("key", "user_id", "agent_id", "session_id", "valid_from", "valid_to")] == [None] * 6

    async def test_content_hash_ignores_case_and_whitespace(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        a = await store(client, tenant_a, "The user lives in Berlin")
        b = await store(client, tenant_a, "  the USER lives\n in   berlin ")
        c = await store(client, tenant_a, "The user lives in Munich")

        assert a["content_hash"] == b["content_hash"]
        assert a["content_hash"] != c["content_hash"]

    async def test_timestamps_without_offset_are_utc(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        m = await store(
            client, tenant_a, "Contract signed", valid_from="2024-05-01T12:00:00", valid_to="2024-06-01T00:00:00Z"
        )

        assert at(m["valid_from"]) == datetime(2024, 5, 1, 12, tzinfo=UTC)
        assert at(m["valid_to"]) == datetime(2024, 6, 1, tzinfo=UTC)

    async def test_valid_to_before_valid_from_is_rejected(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post(
            MEMORIES,
            json={"content": "x", "valid_from": "2024-06-01T00:00:00Z", "valid_to": "2024-05-01T00:00:00Z"},
            headers=tenant_a.headers,
        )

        assert "valid_to" in problem(r, 422, "validation_error")["detail"]
        assert await listed(client, tenant_a) == []

    async def test_unknown_namespace_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post("/v1/namespaces/nope/memories", json={"content": "x"}, headers=tenant_a.headers)

        problem(r, 404, "namespace_not_found")


# ---- read -----------------------------------------------------------------------------------


class TestGet:
    async def test_returns_the_stored_memory(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        created = await store(client, tenant_a, COFFEE, type="preference", metadata={"k": "v"}, user_id="u1")

        r = await get(client, tenant_a, created["id"])

        assert r.status_code == 200, r.text
        got = r.json()
        moving = {"access_count", "last_accessed_at"}
        assert {k: v for k, v in got.items() if k not in moving} == {
            k: v for k, v in created.items() if k not in moving
        }

    async def test_a_get_counts_itself_as_an_access(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        created = await store(client, tenant_a, COFFEE)

        first = (await get(client, tenant_a, created["id"])).json()
        second = (await get(client, tenant_a, created["id"])).json()

        assert (first["access_count"], second["access_count"]) == (1, 2)
        assert first["last_accessed_at"] is not None

    async def test_unknown_id_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        problem(await get(client, tenant_a, MISSING_ID), 404, "memory_not_found")

    async def test_memory_is_only_found_in_its_namespace(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post("/v1/namespaces", json={"name": "work"}, headers=tenant_a.headers)
        assert r.status_code == 201, r.text
        m = await store(client, tenant_a, COFFEE)

        r = await client.get(f"/v1/namespaces/work/memories/{m['id']}", headers=tenant_a.headers)

        problem(r, 404, "memory_not_found")

    async def test_other_tenant_sees_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        m = await store(client, tenant_a, ZORBLAX)
        url = f"{MEMORIES}/{m['id']}"

        problem(await client.get(url, headers=tenant_b.headers), 404, "memory_not_found")
        problem(
            await client.patch(url, json={"content": "hijacked"}, headers=tenant_b.headers), 404, "memory_not_found"
        )
        problem(await client.delete(url, headers=tenant_b.headers), 404, "memory_not_found")
        assert await listed(client, tenant_b) == []
        assert (await search(client, tenant_b, "zorblax"))["results"] == []

        r = await get(client, tenant_a, m["id"])
        assert r.json()["content"] == ZORBLAX


# ---- update ---------------------------------------------------------------------------------


class TestUpdate:
    async def patch(
        self, client: httpx.AsyncClient, tenant: Tenant, memory_id: str, body: dict[str, Any]
    ) -> httpx.Response:
        return await client.patch(f"{MEMORIES}/{memory_id}", json=body, headers=tenant.headers)

    async def test_new_content_is_re_embedded(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await store_many(client, tenant_a, [COFFEE, *DISTRACTORS])
        m = await store(client, tenant_a, f"{SISTER}; she collects zorblax figurines")
        assert m["id"] in result_ids(await search(client, tenant_a, "relatives abroad", min_score=0.3))
        assert (await search(client, tenant_a, "zorblax"))["results"][0]["signals"]["lexical_rank"] == 1

        r = await self.patch(client, tenant_a, m["id"], {"content": BUDGET})

        assert r.status_code == 200, r.text
        patched = r.json()
        assert patched["content"] == BUDGET
        assert patched["content_hash"] != m["content_hash"]
        assert patched["embedding_model"] == MODEL
        assert at(patched["updated_at"]) > at(m["updated_at"])  # type: ignore[operator]
        by_new_meaning = await search(client, tenant_a, "when is the finance meeting")
        assert result_ids(by_new_meaning)[0] == m["id"]
        by_old_meaning = await search(client, tenant_a, "relatives abroad", min_score=0.3)
        assert m["id"] not in result_ids(by_old_meaning)
        by_old_word = await search(client, tenant_a, "zorblax")
        assert by_old_word["metrics"]["matched_by"]["lexical"] == 0

    async def test_metadata_is_replaced_not_merged(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        m = await store(client, tenant_a, COFFEE, metadata={"a": 1, "b": 2})

        r = await self.patch(client, tenant_a, m["id"], {"metadata": {"c": 3}})

        assert r.status_code == 200, r.text
        assert r.json()["metadata"] == {"c": 3}
        assert (await get(client, tenant_a, m["id"])).json()["metadata"] == {"c": 3}

    async def test_omitted_fields_stay_as_they_are(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        m = await store(client, tenant_a, COFFEE, type="preference", user_id="u1", metadata={"a": 1}, key="drink")

        r = await self.patch(client, tenant_a, m["id"], {"importance": 0.9, "state": "archived", "type": "decision"})

        assert r.status_code == 200, r.text
        out = r.json()
        assert out["importance"] == pytest.approx(0.9)
        assert out["state"] == "archived"
        assert out["type"] == "decision"
        for unchanged in ("content", "user_id", "metadata", "key", "content_hash", "created_at"):
            assert out[unchanged] == m[unchanged], unchanged

    async def test_null_clears_an_optional_field(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        span = {"valid_from": "2024-01-01T00:00:00Z", "valid_to": "2025-01-01T00:00:00Z"}
        m = await store(client, tenant_a, COFFEE, user_id="u1", key="drink", scope="namespace", **span)

        r = await self.patch(client, tenant_a, m["id"], {"user_id": None, "key": None, "valid_to": None})

        assert r.status_code == 200, r.text
        stored = (await get(client, tenant_a, m["id"])).json()
        assert (stored["user_id"], stored["key"], stored["valid_to"]) == (None, None, None)
        assert at(stored["valid_from"]) == datetime(2024, 1, 1, tzinfo=UTC)

    @pytest.mark.parametrize("field", ["content", "type", "metadata", "importance", "confidence", "state"])
    async def test_null_for_a_required_field_is_rejected(
        self, client: httpx.AsyncClient, tenant_a: Tenant, field: str
    ) -> None:
        m = await store(client, tenant_a, COFFEE)

        r = await self.patch(client, tenant_a, m["id"], {field: None})

        assert problem(r, 422, "validation_error")["field"] == field
        assert (await get(client, tenant_a, m["id"])).json()[field] == m[field]

    async def test_empty_patch_is_rejected(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        m = await store(client, tenant_a, COFFEE)

        r = await self.patch(client, tenant_a, m["id"], {})

        assert "nothing to update" in problem(r, 422, "validation_error")["detail"]

    async def test_valid_to_before_valid_from_in_body_is_rejected(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        m = await store(client, tenant_a, COFFEE)

        r = await self.patch(
            client, tenant_a, m["id"], {"valid_from": "2024-06-01T00:00:00Z", "valid_to": "2024-05-01T00:00:00Z"}
        )

        assert "valid_to" in problem(r, 422, "validation_error")["detail"]
        assert (await get(client, tenant_a, m["id"])).json()["valid_from"] is None

    @pytest.mark.parametrize(
        ("stored", "patch"),
        [
            ({"valid_from": "2024-06-01T00:00:00Z"}, {"valid_to": "2024-05-01T00:00:00Z"}),
            ({"valid_to": "2024-05-01T00:00:00Z"}, {"valid_from": "2024-06-01T00:00:00Z"}),
            # Without an offset the new time is UTC, and still compared with the stored one.
            ({"valid_from": "2024-06-01T00:00:00+00:00"}, {"valid_to": "2024-05-01T00:00:00"}),
        ],
    )
    async def test_range_inverted_against_stored_value_is_rejected(
        self, client: httpx.AsyncClient, tenant_a: Tenant, stored: dict[str, str], patch: dict[str, str]
    ) -> None:
        m = await store(client, tenant_a, COFFEE, **stored)

        r = await self.patch(client, tenant_a, m["id"], patch)

        assert problem(r, 422, "validation_error")["field"] == "valid_to"
        after = (await get(client, tenant_a, m["id"])).json()
        assert (after["valid_from"], after["valid_to"]) == (m["valid_from"], m["valid_to"])

    async def test_range_extended_past_stored_start(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        m = await store(client, tenant_a, COFFEE, valid_from="2024-06-01T00:00:00Z")

        r = await self.patch(client, tenant_a, m["id"], {"valid_to": "2024-07-01T00:00:00"})

        assert r.status_code == 200, r.text
        assert at(r.json()["valid_to"]) == datetime(2024, 7, 1, tzinfo=UTC)

    async def test_unknown_id_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        problem(await self.patch(client, tenant_a, MISSING_ID, {"importance": 0.1}), 404, "memory_not_found")


# ---- delete ---------------------------------------------------------------------------------


class TestDelete:
    async def test_deleted_memory_is_gone(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        keep = await store(client, tenant_a, COFFEE)
        gone = await store(client, tenant_a, ZORBLAX)

        r = await client.delete(f"{MEMORIES}/{gone['id']}", headers=tenant_a.headers)

        assert r.status_code == 204
        assert r.content == b""
        problem(await get(client, tenant_a, gone["id"]), 404, "memory_not_found")
        assert ids(await listed(client, tenant_a)) == [keep["id"]]
        assert result_ids(await search(client, tenant_a, "zorblax")) == [keep["id"]]

    async def test_deleting_twice_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        m = await store(client, tenant_a, COFFEE)
        url = f"{MEMORIES}/{m['id']}"
        assert (await client.delete(url, headers=tenant_a.headers)).status_code == 204

        problem(await client.delete(url, headers=tenant_a.headers), 404, "memory_not_found")


# ---- batch ----------------------------------------------------------------------------------


class TestBatch:
    async def test_stores_all_in_order(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        items = [
            {"content": COFFEE, "type": "preference", "user_id": "u1"},
            {"content": CAR, "type": "fact"},
            {"content": BUDGET, "type": "event", "metadata": {"team": "finance"}},
            {"content": DISTRACTORS[0], "type": "procedure", "state": "tentative"},
        ]

        r = await client.post(BATCH, json={"memories": items}, headers=tenant_a.headers)

        assert r.status_code == 201, r.text
        out = r.json()["memories"]
        assert [m["content"] for m in out] == [i["content"] for i in items]
        assert [m["type"] for m in out] == [i["type"] for i in items]
        assert out[0]["user_id"] == "u1"
        assert out[2]["metadata"] == {"team": "finance"}
        assert out[3]["state"] == "tentative"
        assert all(m["embedding_model"] == MODEL and m["namespace"] == "default" for m in out)
        assert sorted(ids(await listed(client, tenant_a))) == sorted(ids(out))

    @pytest.mark.slow  # embeds a thousand memories
    async def test_a_thousand_is_the_limit(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        items = [{"content": f"batch memory number {i}"} for i in range(1001)]

        r = await client.post(BATCH, json={"memories": items}, headers=tenant_a.headers)
        assert problem(r, 422, "validation_error")["field"] == "memories"
        assert await listed(client, tenant_a) == []

        r = await client.post(BATCH, json={"memories": items[:1000]}, headers=tenant_a.headers)
        assert r.status_code == 201, r.text
        assert [m["content"] for m in r.json()["memories"]] == [i["content"] for i in items[:1000]]

    async def test_empty_batch_is_rejected(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post(BATCH, json={"memories": []}, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == "memories"

    @pytest.mark.parametrize(
        ("bad_item", "field"),
        [
            ({"content": ""}, "memories[3].content"),
            ({"type": "fact"}, "memories[3].content"),
            ({"content": "x", "type": "gossip"}, "memories[3].type"),
            ({"content": "x", "importance": 2}, "memories[3].importance"),
            ({"content": "x", "colour": "blue"}, "memories[3].colour"),
            ({"content": "x", "metadata": {"a": "\u0000"}}, "memories[3].metadata"),
        ],
    )
    async def test_one_invalid_item_stores_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, bad_item: dict[str, Any], field: str
    ) -> None:
        items: list[dict[str, Any]] = [{"content": c} for c in [COFFEE, CAR, BUDGET, "placeholder", SISTER]]
        items[3] = bad_item

        r = await client.post(BATCH, json={"memories": items}, headers=tenant_a.headers)

        body = problem(r, 422, "validation_error")
        assert body["field"] == field
        assert body["detail"].startswith(field)
        assert await listed(client, tenant_a) == []

    async def test_unknown_namespace_stores_nothing(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post(
            "/v1/namespaces/nope/memories/batch", json={"memories": [{"content": COFFEE}]}, headers=tenant_a.headers
        )

        problem(r, 404, "namespace_not_found")
        r = await client.get("/v1/namespaces", headers=tenant_a.headers)
        assert [(n["name"], n["memory_count"]) for n in r.json()] == [("default", 0)]


# ---- list -----------------------------------------------------------------------------------


class TestList:
    async def test_newest_first(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        stored = [await store(client, tenant_a, c) for c in (COFFEE, CAR, BUDGET)]

        r = await client.get(MEMORIES, headers=tenant_a.headers)

        assert r.status_code == 200, r.text
        assert ids(r.json()["data"]) == ids(stored)[::-1]
        assert r.json()["next_cursor"] is None

    async def test_cursor_visits_every_memory_once(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        # A batch shares one created_at, so the pages must also order by id to neither skip nor repeat.
        stored = await store_many(client, tenant_a, [f"batch memory {i}" for i in range(7)])
        stored += [await store(client, tenant_a, c) for c in (COFFEE, CAR)]

        seen: list[str] = []
        pages = 0
        cursor: str | None = None
        while True:
            params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
            r = await client.get(MEMORIES, params=params, headers=tenant_a.headers)
            assert r.status_code == 200, r.text
            page = r.json()
            assert 1 <= len(page["data"]) <= 2
            seen += ids(page["data"])
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
            assert pages < 10, "pagination does not end"

        assert pages == 5
        assert len(seen) == len(set(seen))
        assert set(seen) == set(ids(stored))
        assert seen[:2] == [stored[-1]["id"], stored[-2]["id"]]

    async def test_filter_by_type_repeatable(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        fact = await store(client, tenant_a, CAR, type="fact")
        pref = await store(client, tenant_a, COFFEE, type="preference")
        await store(client, tenant_a, BUDGET, type="event")

        assert ids(await listed(client, tenant_a, {"type": "preference"})) == [pref["id"]]
        both = await listed(client, tenant_a, [("type", "fact"), ("type", "preference")])
        assert sorted(ids(both)) == sorted([fact["id"], pref["id"]])

    async def test_filter_by_agent(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        mine = await store(client, tenant_a, COFFEE, agent_id="alice")
        await store(client, tenant_a, CAR, agent_id="bob")
        await store(client, tenant_a, BUDGET)

        assert ids(await listed(client, tenant_a, {"agent_id": "alice"})) == [mine["id"]]
        assert await listed(client, tenant_a, {"agent_id": "carol"}) == []

    @pytest.mark.parametrize("field", ["user_id", "session_id"])
    async def test_reading_as_a_user_or_session(self, client: httpx.AsyncClient, tenant_a: Tenant, field: str) -> None:
        # Their own memories and the shared ones (the scope chain), never another user's or session's.
        mine = await store(client, tenant_a, COFFEE, **{field: "alice"})
        await store(client, tenant_a, CAR, **{field: "bob"})
        shared = await store(client, tenant_a, BUDGET)

        assert sorted(ids(await listed(client, tenant_a, {field: "alice"}))) == sorted([mine["id"], shared["id"]])
        assert ids(await listed(client, tenant_a, {field: "carol"})) == [shared["id"]]

    async def test_archived_only_when_asked(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        stable = await store(client, tenant_a, COFFEE)
        tentative = await store(client, tenant_a, CAR, state="tentative")
        archived = await store(client, tenant_a, BUDGET, state="archived")

        assert sorted(ids(await listed(client, tenant_a))) == sorted([stable["id"], tentative["id"]])
        assert ids(await listed(client, tenant_a, {"state": "archived"})) == [archived["id"]]
        some = await listed(client, tenant_a, [("state", "archived"), ("state", "tentative")])
        assert sorted(ids(some)) == sorted([archived["id"], tentative["id"]])

    async def test_filter_by_metadata_containment(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        x1 = await store(client, tenant_a, COFFEE, metadata={"project": "x", "lang": "py", "tags": ["a", "b"]})
        x2 = await store(client, tenant_a, CAR, metadata={"project": "x"})
        await store(client, tenant_a, BUDGET, metadata={"project": "y", "tags": ["a"]})
        await store(client, tenant_a, SISTER)

        by_project = await listed(client, tenant_a, {"metadata": json.dumps({"project": "x"})})
        assert sorted(ids(by_project)) == sorted([x1["id"], x2["id"]])
        by_two_keys = await listed(client, tenant_a, {"metadata": json.dumps({"project": "x", "tags": ["b"]})})
        assert ids(by_two_keys) == [x1["id"]]
        assert await listed(client, tenant_a, {"metadata": json.dumps({"project": "z"})}) == []

    async def test_filters_combine(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        hit = await store(client, tenant_a, COFFEE, type="preference", user_id="alice", metadata={"p": 1})
        await store(client, tenant_a, CAR, type="preference", user_id="bob", metadata={"p": 1})
        await store(client, tenant_a, BUDGET, type="fact", user_id="alice", metadata={"p": 1})
        await store(client, tenant_a, SISTER, type="preference", user_id="alice", metadata={"p": 2})

        params = {"type": "preference", "user_id": "alice", "metadata": '{"p": 1}'}
        assert ids(await listed(client, tenant_a, params)) == [hit["id"]]

    @pytest.mark.parametrize(
        "cursor",
        [
            "garbage",
            "!!!",
            "é",
            "W10",  # base64 of "[]"
            "bnVsbA",  # base64 of "null"
            "WzEsMl0",  # base64 of "[1,2]"
            "eyJhIjoxLCJiIjoyfQ",  # base64 of '{"a":1,"b":2}'
            "WyJub3QgYSBkYXRlIiwibm90IGEgdXVpZCJd",  # base64 of '["not a date","not a uuid"]'
        ],
    )
    async def test_garbage_cursor_is_422(self, client: httpx.AsyncClient, tenant_a: Tenant, cursor: str) -> None:
        r = await client.get(MEMORIES, params={"cursor": cursor}, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == "cursor"

    @pytest.mark.parametrize(
        "metadata",
        [
            "{not json",
            "[1, 2]",
            '"project"',
            "42",
            '{"a": NaN}',
            '{"a": Infinity}',
            '{"a": "\\u0000"}',
            '{"\\u0000": 1}',
        ],
    )
    async def test_bad_metadata_filter_is_422(self, client: httpx.AsyncClient, tenant_a: Tenant, metadata: str) -> None:
        r = await client.get(MEMORIES, params={"metadata": metadata}, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == "metadata"

    @pytest.mark.parametrize(
        "params",
        [
            {"limit": 0},
            {"limit": 201},
            {"limit": "ten"},
            {"type": "gossip"},
            {"state": "deleted"},
            {"user_id": "a\u0000b"},
            {"session_id": "s" * 201},
        ],
    )
    async def test_bad_query_parameter_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, params: dict[str, Any]
    ) -> None:
        r = await client.get(MEMORIES, params=params, headers=tenant_a.headers)

        problem(r, 422, "validation_error")

    async def test_unknown_namespace_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        problem(await client.get("/v1/namespaces/nope/memories", headers=tenant_a.headers), 404, "namespace_not_found")

    async def test_other_tenant_sees_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        await store_many(client, tenant_a, [COFFEE, CAR])

        assert await listed(client, tenant_b) == []
        assert len(await listed(client, tenant_a)) == 2


# ---- search ---------------------------------------------------------------------------------


class TestSearch:
    async def test_finds_by_meaning_without_shared_words(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        stored = await store_many(client, tenant_a, [*DISTRACTORS, COFFEE, CAR, BUDGET])
        by_content = {m["content"]: m["id"] for m in stored}

        for query, expected in (("favourite hot drink", COFFEE), ("what vehicle do they own", CAR)):
            out = await search(client, tenant_a, query)
            top = out["results"][0]
            assert top["memory"]["id"] == by_content[expected], query
            assert top["signals"]["dense_rank"] == 1
            assert top["signals"]["lexical_rank"] is None  # no shared words: found by meaning alone

    async def test_finds_a_rare_word(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await store_many(client, tenant_a, [*DISTRACTORS, COFFEE, CAR])
        target = await store(client, tenant_a, ZORBLAX)

        out = await search(client, tenant_a, "zorblax")

        top = out["results"][0]
        assert top["memory"]["id"] == target["id"]
        assert top["signals"]["lexical_rank"] == 1
        assert top["signals"]["lexical_score"] > 0
        assert out["metrics"]["matched_by"]["lexical"] == 1

    async def test_result_and_metrics_shape(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await store_many(client, tenant_a, [*DISTRACTORS, COFFEE])

        out = await search(client, tenant_a, "dark roast coffee")

        assert len(out["results"]) == 5
        for result in out["results"]:
            assert isinstance(result["score"], float)
            # Weighted fusion scales each channel over the candidates: the weakest may score 0.
            assert 0 <= result["score"] <= 1
            assert -1 <= result["semantic_relevance"] <= 1
            signals = {"dense_rank", "lexical_rank", "lexical_score", "channels", "neighbourhood"}
            assert set(result["signals"]) == signals
            assert result["memory"]["namespace"] == "default"
            assert result["memory"]["content"] in [*DISTRACTORS, COFFEE]
        scores = [r["score"] for r in out["results"]]
        assert scores == sorted(scores, reverse=True)
        assert out["results"][0]["memory"]["content"] == COFFEE
        assert out["results"][0]["score"] == pytest.approx(1.0)  # first in both channels
        metrics = out["metrics"]
        assert {"embed", "sql", "total"} <= metrics["timings_ms"].keys()
        assert all(v >= 0 for v in metrics["timings_ms"].values())
        assert metrics["matched_by"] == {"dense": 5, "lexical": 1}
        assert metrics["backend_failures"] == []
        assert metrics["min_score_applied"] is False

    async def test_limit_is_respected(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await store_many(client, tenant_a, [*DISTRACTORS, COFFEE, CAR, BUDGET])

        out = await search(client, tenant_a, "favourite hot drink", limit=3)

        assert len(out["results"]) == 3
        assert out["results"][0]["memory"]["content"] == COFFEE

    async def test_filters_are_respected(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await store(client, tenant_a, COFFEE, type="preference", user_id="alice")
        tea = await store(
            client, tenant_a, "The user enjoys green tea in the evening", type="preference", user_id="bob"
        )
        await store(client, tenant_a, "Coffee beans are stored in the kitchen", type="fact", user_id="bob")

        out = await search(client, tenant_a, "favourite hot drink", filters={"type": ["preference"], "user_id": "bob"})

        assert result_ids(out) == [tea["id"]]

    async def test_min_score_drops_weak_matches(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await store_many(client, tenant_a, [*DISTRACTORS, COFFEE, CAR])
        everything = await search(client, tenant_a, "favourite hot drink")
        assert len(everything["results"]) == 6

        out = await search(client, tenant_a, "favourite hot drink", min_score=0.3)

        assert out["metrics"]["min_score_applied"] is True
        assert [r["memory"]["content"] for r in out["results"]] == [COFFEE]
        assert all(r["semantic_relevance"] >= 0.3 for r in out["results"])
        weak = [r for r in everything["results"] if r["semantic_relevance"] < 0.3]
        assert len(weak) == 5
        # The channel counts describe the results returned, not the ones min_score dropped.
        assert everything["metrics"]["matched_by"]["dense"] == 6
        assert out["metrics"]["matched_by"]["dense"] == 1

    async def test_archived_memories_are_excluded(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await store(client, tenant_a, COFFEE)
        archived = await store(client, tenant_a, ZORBLAX, state="archived")

        assert archived["id"] not in result_ids(await search(client, tenant_a, "zorblax"))
        asked = await search(client, tenant_a, "zorblax", filters={"state": ["archived"]})
        assert result_ids(asked) == [archived["id"]]

    async def test_search_counts_an_access(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        m = await store(client, tenant_a, ZORBLAX)
        first = (await get(client, tenant_a, m["id"])).json()

        out = await search(client, tenant_a, "zorblax")
        assert result_ids(out) == [m["id"]]

        later = (await get(client, tenant_a, m["id"])).json()
        assert later["access_count"] == first["access_count"] + 2  # the first GET and the search
        assert later["last_accessed_at"] is not None

    # A query of only spaces is refused (tests/test_fields.py): it asks for nothing.
    @pytest.mark.parametrize("query", ["the", "C++ && || ! <-> ( ) ' \" :* AT&T", "a:b & c | !d", "?" * 50])
    async def test_odd_queries_still_answer(self, client: httpx.AsyncClient, tenant_a: Tenant, query: str) -> None:
        await store_many(client, tenant_a, [COFFEE, CAR])

        out = await search(client, tenant_a, query)

        assert len(out["results"]) == 2  # the vectors still rank everything
        assert out["metrics"]["backend_failures"] == []

    async def test_unknown_namespace_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post("/v1/namespaces/nope/search", json={"query": "x"}, headers=tenant_a.headers)

        problem(r, 404, "namespace_not_found")

    async def test_other_tenant_sees_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        await store_many(client, tenant_a, [ZORBLAX, COFFEE])
        await store(client, tenant_b, CAR)

        out = await search(client, tenant_b, "zorblax")

        assert [r["memory"]["content"] for r in out["results"]] == [CAR]


# ---- bad input --------------------------------------------------------------------------------


class TestBadInput:
    @pytest.mark.parametrize(
        ("method", "url"),
        [("POST", MEMORIES), ("POST", BATCH), ("POST", SEARCH), ("PATCH", f"{MEMORIES}/{MISSING_ID}")],
    )
    @pytest.mark.parametrize("raw", [b"{not json", b"", b"null", b"[1, 2]", b'"text"', b"\xff\xfe"])
    async def test_body_that_is_not_a_json_object(
        self, client: httpx.AsyncClient, tenant_a: Tenant, method: str, url: str, raw: bytes
    ) -> None:
        headers = {**tenant_a.headers, "content-type": "application/json"}

        r = await client.request(method, url, content=raw, headers=headers)

        problem(r, 422, "validation_error")

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"content": 123}, "content"),
            ({"content": ["a"]}, "content"),
            ({"content": "x", "importance": "high"}, "importance"),
            ({"content": "x", "importance": 1.5}, "importance"),
            ({"content": "x", "confidence": -0.1}, "confidence"),
            ({"content": "x", "metadata": "x"}, "metadata"),
            ({"content": "x", "metadata": [1]}, "metadata"),
            ({"content": "x", "user_id": 7}, "user_id"),
            ({"content": "x", "user_id": ""}, "user_id"),
            ({"content": "x", "valid_from": "yesterday"}, "valid_from"),
            ({"content": "x", "type": "gossip"}, "type"),
            ({"content": "x", "state": "deleted"}, "state"),
            ({"content": "x", "colour": "blue"}, "colour"),
            ({"content": "x", "embedding": [0.1]}, "embedding"),
            ({"content": ""}, "content"),
            ({"content": " \n\t "}, "content"),
            ({"content": "x" * 32_001}, "content"),
            ({"content": "a\u0000b"}, "content"),
            ({"content": "x", "key": "k\u0000"}, "key"),
            ({"content": "x", "agent_id": "a\u0000"}, "agent_id"),
            ({}, "content"),
        ],
    )
    async def test_invalid_memory_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, body: dict[str, Any], field: str
    ) -> None:
        r = await client.post(MEMORIES, json=body, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == field
        assert await listed(client, tenant_a) == []

    async def test_content_of_32000_characters_is_accepted(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        m = await store(client, tenant_a, "é" * 32_000)

        assert len(m["content"]) == 32_000

    @pytest.mark.parametrize(
        "raw_metadata",
        [
            '{"a": NaN}',
            '{"a": [1, Infinity]}',
            '{"a": -Infinity}',
            '{"a": "b\\u0000"}',
            '{"a": {"\\u0000": 1}}',
            '{"a": "\\ud800"}',
            '{"a": ' * 40 + "1" + "}" * 40,
            '{"a": "' + "x" * 17_000 + '"}',
        ],
    )
    async def test_metadata_the_database_cannot_hold_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, raw_metadata: str
    ) -> None:
        raw = '{"content": "x", "metadata": ' + raw_metadata + "}"
        headers = {**tenant_a.headers, "content-type": "application/json"}

        r = await client.post(MEMORIES, content=raw, headers=headers)

        assert problem(r, 422, "validation_error")["field"] == "metadata"
        assert await listed(client, tenant_a) == []

    async def test_deeply_nested_metadata_within_limit_round_trips(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        nested: Any = "leaf"
        for _ in range(30):
            nested = {"a": nested}

        m = await store(client, tenant_a, ZORBLAX, metadata=nested)

        assert m["metadata"] == nested
        assert result_ids(await search(client, tenant_a, "zorblax")) == [m["id"]]

    @pytest.mark.parametrize("stamp", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
    async def test_timestamp_outside_utc_years_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, stamp: str
    ) -> None:
        r = await client.post(MEMORIES, json={"content": "x", "valid_from": stamp}, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == "valid_from"

    async def test_mixed_naive_and_zoned_timestamps(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post(
            MEMORIES,
            json={"content": "x", "valid_from": "2024-06-01T00:00:00", "valid_to": "2024-05-01T00:00:00Z"},
            headers=tenant_a.headers,
        )

        problem(r, 422, "validation_error")

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"query": ""}, "query"),
            ({"query": "a\u0000b"}, "query"),
            ({"query": "x" * 4001}, "query"),
            ({"query": 5}, "query"),
            ({"query": "x", "limit": 0}, "limit"),
            ({"query": "x", "limit": 101}, "limit"),
            ({"query": "x", "min_score": 1.5}, "min_score"),
            ({"query": "x", "top_k": 3}, "top_k"),
            ({"query": "x", "filters": {"colour": "blue"}}, "filters.colour"),
            ({"query": "x", "filters": {"type": ["gossip"]}}, "filters.type[0]"),
            ({"query": "x", "filters": {"user_id": "u\u0000"}}, "filters.user_id"),
            ({"query": "x", "filters": {"metadata": {"a": "\u0000"}}}, "filters.metadata"),
            ({"limit": 3}, "query"),
        ],
    )
    async def test_invalid_search_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, body: dict[str, Any], field: str
    ) -> None:
        r = await client.post(SEARCH, json=body, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == field

    async def test_non_finite_metadata_filter_in_search_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        headers = {**tenant_a.headers, "content-type": "application/json"}

        r = await client.post(SEARCH, content='{"query": "x", "filters": {"metadata": {"a": NaN}}}', headers=headers)

        assert problem(r, 422, "validation_error")["field"] == "filters.metadata"

    @pytest.mark.parametrize("method", ["GET", "PATCH", "DELETE"])
    @pytest.mark.parametrize("bad_id", ["not-a-uuid", "123", "00000000-0000-0000-0000-00000000000g"])
    async def test_bad_uuid_in_path_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, method: str, bad_id: str
    ) -> None:
        body = {"importance": 0.1} if method == "PATCH" else None

        r = await client.request(method, f"{MEMORIES}/{bad_id}", json=body, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == "memory_id"

    @pytest.mark.parametrize("ns", ["bad%20name", "-leading-dash", "a" * 64, "a%00b", "%C3%A9t%C3%A9", ".hidden"])
    @pytest.mark.parametrize(
        ("method", "suffix", "body"),
        [("GET", "memories", None), ("POST", "memories", {"content": "x"}), ("POST", "search", {"query": "x"})],
    )
    async def test_invalid_namespace_in_path_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, ns: str, method: str, suffix: str, body: Any
    ) -> None:
        r = await client.request(method, f"/v1/namespaces/{ns}/{suffix}", json=body, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == "ns"

    async def test_body_over_the_limit_with_content_length_is_413(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        raw = json.dumps({"content": "x", "metadata": {"pad": "y" * 1_000_001}}).encode()
        headers = {**tenant_a.headers, "content-type": "application/json"}

        r = await client.post(MEMORIES, content=raw, headers=headers)

        assert int(r.request.headers["content-length"]) > 1_000_000
        problem(r, 413, "payload_too_large")
        assert await listed(client, tenant_a) == []

    async def test_streamed_body_over_the_limit_is_413(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        async def chunks() -> AsyncIterator[bytes]:
            yield b'{"content": "x", "metadata": {"pad": "'
            for _ in range(11):
                yield b"y" * 100_000
            yield b'"}}'

        headers = {**tenant_a.headers, "content-type": "application/json"}

        r = await client.post(MEMORIES, content=chunks(), headers=headers)

        assert "content-length" not in r.request.headers
        problem(r, 413, "payload_too_large")
        assert await listed(client, tenant_a) == []

    async def test_body_just_under_the_limit_is_not_413(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        # Under the byte cap but over the metadata cap: the request reaches validation.
        raw = json.dumps({"content": "x", "metadata": {"pad": "y" * 990_000}}).encode()
        headers = {**tenant_a.headers, "content-type": "application/json"}

        r = await client.post(MEMORIES, content=raw, headers=headers)

        assert problem(r, 422, "validation_error")["field"] == "metadata"

    async def test_unknown_route_is_404_problem(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        problem(await client.get("/v1/nothing-here", headers=tenant_a.headers), 404, "not_found")
        problem(await client.get(f"{MEMORIES}/{MISSING_ID}/extra", headers=tenant_a.headers), 404, "not_found")

    async def test_wrong_method_is_405_problem(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        problem(await client.put(MEMORIES, json={"content": "x"}, headers=tenant_a.headers), 405, "method_not_allowed")

    async def test_missing_or_wrong_key_is_401_problem(self, client: httpx.AsyncClient) -> None:
        problem(await client.get(MEMORIES), 401, "missing_credentials")
        wrong = {"Authorization": "Bearer mv_notarealkeynotarealkeynotarealkey0000"}
        problem(await client.post(SEARCH, json={"query": "x"}, headers=wrong), 401, "invalid_api_key")

    async def test_request_id_is_echoed(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        headers = {**tenant_a.headers, "X-Request-ID": "trace-123"}

        r = await client.get(f"{MEMORIES}/{MISSING_ID}", headers=headers)

        assert problem(r, 404, "memory_not_found")["request_id"] == "trace-123"
