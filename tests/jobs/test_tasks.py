"""Extraction jobs end to end: ingest over REST, the job runs (in-process threads here; a real
`memvault worker` process in test_worker.py), memories appear with types and resolved dates,
exactly once."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import UTC, datetime

import httpx

from memvault.api import NamespaceAPI
from tests.conftest import Tenant
from tests.jobs.helpers import all_memories, new_id, wait_for_job
from tests.memories.test_router import problem

SAID_AT = "2024-05-08T15:00:00Z"  # a Wednesday

CONVERSATION = [
    ("user", "I went to the dentist yesterday."),
    ("user", "I prefer window seats on long flights."),
    ("user", "Please always answer in British English."),
    ("user", "We decided to use PostgreSQL for the billing service."),
    ("user", "I need to renew my passport next month."),
    ("user", "My sister Ana lives in Lisbon."),
    ("user", "Last Friday I met Kenji at the climbing gym."),
    ("assistant", "Noted! I will keep all of that in mind for you."),
    ("user", "Thanks!"),
    ("user", "In two weeks I'm flying to Tokyo."),
]


def events_body(session_id: str, messages: list[tuple[str, str]] = CONVERSATION, at: str = SAID_AT) -> dict:
    return {
        "session_id": session_id,
        "user_id": "u1",
        "messages": [{"role": role, "content": text, "timestamp": at} for role, text in messages],
    }


async def ingest(client: httpx.AsyncClient, tenant: Tenant, body: dict) -> dict:
    r = await client.post(f"/v1/namespaces/{tenant.namespace}/events", json=body, headers=tenant.headers)
    assert r.status_code == 202, r.text
    return r.json()


def by_content(memories: list) -> dict[str, object]:
    return {m.content: m for m in memories}


class TestExtractionInProcess:
    async def test_conversation_becomes_typed_memories_with_resolved_dates(
        self, inproc: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        out = await ingest(inproc, tenant_a, events_body("s-" + new_id()))
        job = await wait_for_job(inproc, tenant_a.headers, out["job_id"])

        assert job["status"] == "succeeded", job
        assert job["kind"] == "extraction" and job["namespace"] == "default"
        assert job["progress"] == 1.0 and job["attempts"] == 1 and job["error"] is None
        assert job["result"]["events"] == len(CONVERSATION)
        assert job["result"]["memories_created"] == 8
        mems = by_content(await all_memories(api, tenant_a.principal))
        expected = {
            "I went to the dentist yesterday (2024-05-07)": ("event", "2024-05-07"),
            "I prefer window seats on long flights": ("preference", None),
            "Please always answer in British English": ("instruction", None),
            "We decided to use PostgreSQL for the billing service": ("decision", None),
            "I need to renew my passport next month (2024-06)": ("task", "2024-06-01"),
            "My sister Ana lives in Lisbon": ("fact", None),
            "Last Friday (2024-05-03) I met Kenji at the climbing gym": ("event", "2024-05-03"),
            "In two weeks (2024-05-22) I'm flying to Tokyo": ("event", "2024-05-22"),
        }
        assert set(mems) == set(expected)
        event_ids = set(out["event_ids"])
        for content, (kind, day) in expected.items():
            m = mems[content]
            assert m.type.value == kind, content
            assert m.state.value == "tentative"
            assert m.user_id == "u1" and m.scope.value == "user"
            assert m.valid_from == (datetime.fromisoformat(day).replace(tzinfo=UTC) if day else None), content
            assert len(m.source_event_ids) == 1 and str(m.source_event_ids[0]) in event_ids
            assert m.metadata["extracted_by"] == "rules" and m.metadata["extraction_job"] == out["job_id"]
            assert m.created_by == f"job:{out['job_id']}"
        task = mems["I need to renew my passport next month (2024-06)"]
        assert task.metadata["resolved_dates"] == [{"text": "next month", "date": "2024-06-01", "granularity": "month"}]

    async def test_named_people_and_places_become_linked_entities(
        self, inproc: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        body = events_body("s-" + new_id(), [("participant", "My sister Ana moved to Lisbon last year.")])
        body["messages"][0]["speaker"] = "Caroline"
        out = await ingest(inproc, tenant_a, body)
        assert (await wait_for_job(inproc, tenant_a.headers, out["job_id"]))["status"] == "succeeded"

        (m,) = await all_memories(api, tenant_a.principal)
        assert m.content == "Caroline: My sister Ana moved to Lisbon last year (2023)"
        r = await inproc.get("/v1/namespaces/default/entities", headers=tenant_a.headers)
        entities = {(e["name"], e["type"]): e["id"] for e in r.json()["data"]}
        assert set(entities) == {("Caroline", "person"), ("Ana", "person"), ("Lisbon", "location")}
        for entity_id in entities.values():
            r = await inproc.get(f"/v1/namespaces/default/entities/{entity_id}", headers=tenant_a.headers)
            assert [x["id"] for x in r.json()["memories"]] == [str(m.id)]

    async def test_the_same_ingest_twice_stores_nothing_twice(
        self, inproc: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        session = "s-" + new_id()
        first = await ingest(inproc, tenant_a, events_body(session))
        await wait_for_job(inproc, tenant_a.headers, first["job_id"])
        again = await ingest(inproc, tenant_a, events_body(session))
        assert again["job_id"] == first["job_id"] and again["job_created"] is False
        # The same words in another session: a new job, whose memories are already there.
        other = await ingest(inproc, tenant_a, events_body("s-" + new_id()))
        job = await wait_for_job(inproc, tenant_a.headers, other["job_id"])

        assert job["status"] == "succeeded"
        assert job["result"].get("memories_created", 0) == 0 and job["result"]["memories_reinforced"] == 8
        mems = await all_memories(api, tenant_a.principal)
        assert len(mems) == 8
        assert Counter(m.content_hash for m in mems).most_common(1)[0][1] == 1
        # Each memory now cites the event of both mentions and counts them.
        assert all(len(m.source_event_ids) == 2 and m.metadata["mentions"] == 2 for m in mems)

    async def test_running_a_finished_job_again_is_a_no_op(
        self, inproc: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        out = await ingest(inproc, tenant_a, events_body("s-" + new_id()))
        await wait_for_job(inproc, tenant_a.headers, out["job_id"])

        outcome = await api.run_job(tenant_a.principal, uuid.UUID(out["job_id"]))

        assert outcome.status == "skipped" and outcome.result == {"reason": "succeeded"}
        assert len(await all_memories(api, tenant_a.principal)) == 8


class TestJobRoute:
    async def test_unknown_job_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.get("/v1/jobs/00000000-0000-0000-0000-000000000001", headers=tenant_a.headers)
        problem(r, 404, "job_not_found")

    async def test_malformed_id_is_422(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.get("/v1/jobs/not-a-uuid", headers=tenant_a.headers)
        assert r.status_code == 422

    async def test_queued_job_reads_back(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        # The shared test app has Redis and no worker: the job waits, queued.
        out = await ingest(client, tenant_a, events_body("s-" + new_id()))
        r = await client.get(f"/v1/jobs/{out['job_id']}", headers=tenant_a.headers)

        assert r.status_code == 200
        body = r.json()
        assert body["status"] == "queued" and body["attempts"] == 0 and body["result"] is None
        assert body["started_at"] is None and body["finished_at"] is None

    async def test_other_tenant_sees_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        out = await ingest(client, tenant_a, events_body("s-" + new_id()))
        r = await client.get(f"/v1/jobs/{out['job_id']}", headers=tenant_b.headers)
        problem(r, 404, "job_not_found")

    async def test_key_limited_to_another_namespace_sees_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        r = await client.post("/v1/namespaces", json={"name": "other"}, headers=tenant_a.headers)
        assert r.status_code == 201
        r = await client.post(
            "/v1/keys", json={"name": "limited", "scopes": ["read"], "namespaces": ["other"]}, headers=tenant_a.headers
        )
        limited = {"Authorization": f"Bearer {r.json()['key']}"}
        out = await ingest(client, tenant_a, events_body("s-" + new_id()))

        problem(await client.get(f"/v1/jobs/{out['job_id']}", headers=limited), 404, "job_not_found")

    async def test_needs_a_key(self, client: httpx.AsyncClient) -> None:
        r = await client.get("/v1/jobs/00000000-0000-0000-0000-000000000001")
        assert r.status_code == 401
