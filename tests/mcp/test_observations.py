"""Issue 28, part 3, through the real MCP client and REST: a session's events become an
observation when extraction runs (the real job runner, on a thread, as in-process mode runs it),
readable by memory_get_observations and REST and heading memory_get_context; searches across
kinds; memory_job_status following memory_ingest's job; and none of it across tenants."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest

from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from memvault.jobs.runner import JobContext, LoopBoundEmbedder, execute
from tests.conftest import Tenant
from tests.mcp.conftest import call, fails, mcp_session

AT = "2024-05-08T15:00:00Z"
CONVERSATION = [
    ("user", "I want to plan the billing service with Kenji."),
    ("user", "We decided to use PostgreSQL for the billing service."),
    ("assistant", "Good choice. Where will it run?"),
    ("user", "I'm not sure yet whether to host it in Frankfurt or Dublin."),
    ("assistant", "Either works."),
    ("user", "Should we also add read replicas?"),
]


def messages(lines: list[tuple[str, str]], at: str = AT) -> list[dict[str, Any]]:
    return [{"role": role, "content": text, "timestamp": at} for role, text in lines]


@pytest.fixture
async def run_job(settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder) -> Any:
    """Run a queued job to its end as a worker would (the session's app has none)."""
    ctx = JobContext(settings, pg_urls, LoopBoundEmbedder(embedder, asyncio.get_running_loop()))

    async def run(tenant: Tenant, job_id: str) -> None:
        outcome = await asyncio.to_thread(execute, ctx, tenant.id, uuid.UUID(job_id))
        assert outcome.status == "succeeded", outcome

    return run


class TestObservations:
    async def test_events_become_an_observation_read_by_tool_rest_and_context(
        self, base_url: str, client: httpx.AsyncClient, tenant_a: Tenant, run_job: Any
    ) -> None:
        session = "s-" + uuid.uuid4().hex[:8]
        async with mcp_session(base_url, tenant_a.key) as s:
            ingested = await call(s, "memory_ingest", session_id=session, user_id="u1", messages=messages(CONVERSATION))
            job_id = ingested["job_id"]
            queued = await call(s, "memory_job_status", job_id=job_id)
            assert queued["status"] == "queued" and queued["kind"] == "extraction"
            assert (await fails(s, "memory_get_observations", session_id=session)).startswith("observation_not_found:")

            await run_job(tenant_a, job_id)
            done = await call(s, "memory_job_status", job_id=job_id)
            assert done["status"] == "succeeded" and done["progress"] == 1.0
            assert done["result"]["observations_updated"] == 1 and done["result"]["memories_created"] >= 1

            notes = await call(s, "memory_get_observations", session_id=session)
            assert notes["session_id"] == session and notes["user_id"] == "u1"
            assert notes["decisions"] == ["We decided to use PostgreSQL for the billing service"]
            assert notes["open_questions"] == [
                "I'm not sure yet whether to host it in Frankfurt or Dublin.",
                "Should we also add read replicas?",
            ]
            assert "PostgreSQL" in notes["topics"] and notes["summary"].startswith("6 messages")
            assert notes["observed_by"] == "rules" and notes["message_count"] == 6 and notes["job_id"] == job_id

            r = await client.get(f"/v1/namespaces/default/sessions/{session}/observations", headers=tenant_a.headers)
            assert r.status_code == 200, r.text
            assert r.json() == notes

            ctx = await call(s, "memory_get_context", session_id=session, user_id="u1")
            assert ctx["session_observation"] is True
            assert ctx["context"].startswith("## This session\n6 messages")
            assert "- Decision: We decided to use PostgreSQL for the billing service" in ctx["context"]
            assert "- Open question: Should we also add read replicas?" in ctx["context"]
            assert "## What you remember" in ctx["context"] and ctx["tokens"] <= ctx["token_budget"]
            small = await call(s, "memory_get_context", session_id=session, token_budget=60)
            assert small["tokens"] <= 60 and small["context"].startswith("## This session")

            # New events of the session, extracted again: the observation follows the session.
            more = await call(
                s,
                "memory_ingest",
                session_id=session,
                user_id="u1",
                messages=messages([("user", "We decided to host it in Frankfurt.")], "2024-05-09T09:00:00Z"),
            )
            await run_job(tenant_a, more["job_id"])
            notes = await call(s, "memory_get_observations", session_id=session)
            assert notes["message_count"] == 7 and notes["job_id"] == more["job_id"]
            assert "We decided to host it in Frankfurt" in notes["decisions"]
            assert "We decided to use PostgreSQL for the billing service" in notes["decisions"]
            assert "(2024-05-08 to 2024-05-09)" in notes["summary"]

    async def test_organize_job_is_read_by_job_status(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            started = await call(s, "memory_organize", jobs=["dedup"])
            job = await call(s, "memory_job_status", job_id=started["job_id"])
            assert job["id"] == started["job_id"] and job["kind"] == "organize" and job["status"] == "queued"
            assert (await fails(s, "memory_job_status", job_id=str(uuid.uuid4()))).startswith("job_not_found:")

    async def test_unknown_session(self, base_url: str, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            assert (await fails(s, "memory_get_observations", session_id="nope")).startswith("session_not_found:")
        r = await client.get("/v1/namespaces/default/sessions/nope/observations", headers=tenant_a.headers)
        assert r.status_code == 404 and r.json()["code"] == "session_not_found"


class TestKinds:
    async def test_kinds_return_messages_traces_entities_and_the_default_is_unchanged(
        self, base_url: str, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            await call(s, "memory_store", content="Ana's favourite harbour is Valletta", user_id="u1")
            await call(
                s,
                "memory_ingest",
                session_id="harbour-talk",
                user_id="u1",
                messages=messages([("user", "The ferry to Valletta harbour leaves at nine.")]),
            )
            trace = await call(s, "trace_start", task="Book a ferry to Valletta harbour", user_id="u1")
            entity = await call(s, "entity_add", name="Valletta", type="location", description="Capital of Malta")

            default = await call(s, "memory_search", query="Valletta harbour", user_id="u1")
            assert default["results"] and default["results"][0]["content"].startswith("Ana's favourite")
            assert not {"messages", "traces", "entities"} & set(default)

            every = await call(
                s,
                "memory_search",
                query="Valletta harbour",
                user_id="u1",
                kinds=["memories", "messages", "traces", "entities"],
            )
            assert [r["id"] for r in every["results"]] == [r["id"] for r in default["results"]]
            (message,) = every["messages"]
            assert message["content"] == "The ferry to Valletta harbour leaves at nine."
            assert message["session_id"] == "harbour-talk" and message["role"] == "user" and message["score"] > 0
            assert set(message) == {"id", "session_id", "role", "content", "timestamp", "score"}
            assert [t["id"] for t in every["traces"]] == [trace["id"]]
            assert every["entities"][0]["id"] == entity["id"] and every["entities"][0]["name"] == "Valletta"

            only = await call(s, "memory_search", query="ferry", kinds=["messages"])
            assert only["results"] == [] and len(only["messages"]) == 1 and "traces" not in only
            # Reading as another user keeps to that user's messages and traces.
            other = await call(s, "memory_search", query="ferry", user_id="u2", kinds=["messages", "traces"])
            assert other["messages"] == [] and other["traces"] == []

            ctx = await call(
                s, "memory_get_context", query="Valletta ferry", kinds=["memories", "messages", "entities"]
            )
            assert [m["content"] for m in ctx["messages"]] == ["The ferry to Valletta harbour leaves at nine."]
            assert "### Related" in ctx["context"] and "[entity] Valletta (location)" in ctx["context"]
            assert "[message 2024-05-08, session harbour-talk, user] The ferry" in ctx["context"]

        r = await client.post(
            "/v1/namespaces/default/search",
            json={"query": "Valletta", "kinds": ["entities"]},
            headers=tenant_a.headers,
        )
        assert r.status_code == 200, r.text
        assert r.json()["entities"][0]["name"] == "Valletta" and r.json()["results"] == []
        plain = await client.post("/v1/namespaces/default/search", json={"query": "Valletta"}, headers=tenant_a.headers)
        assert plain.status_code == 200 and not {"messages", "traces", "entities"} & set(plain.json())
        bad = await client.post(
            "/v1/namespaces/default/search", json={"query": "x", "kinds": ["files"]}, headers=tenant_a.headers
        )
        assert bad.status_code == 422


class TestAcrossTenants:
    async def test_b_sees_none_of_a(
        self, base_url: str, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant, run_job: Any
    ) -> None:
        session = "s-" + uuid.uuid4().hex[:8]
        async with mcp_session(base_url, tenant_a.key) as a:
            ingested = await call(
                a, "memory_ingest", session_id=session, messages=messages([("user", "We decided to buy the Zeppelin.")])
            )
            await run_job(tenant_a, ingested["job_id"])
            await call(a, "trace_start", task="Inspect the Zeppelin")
            await call(a, "entity_add", name="Zeppelin", type="object")
            assert (await call(a, "memory_get_observations", session_id=session))["decisions"]
        async with mcp_session(base_url, tenant_b.key) as b:
            assert (await fails(b, "memory_get_observations", session_id=session)).startswith("session_not_found:")
            assert (await fails(b, "memory_job_status", job_id=ingested["job_id"])).startswith("job_not_found:")
            found = await call(b, "memory_search", query="Zeppelin", kinds=["messages", "traces", "entities"])
            assert found["messages"] == [] and found["traces"] == [] and found["entities"] == []
            ctx = await call(b, "memory_get_context", session_id=session, query="Zeppelin", kinds=["messages"])
            assert "session_observation" not in ctx and ctx["messages"] == [] and "Zeppelin" not in ctx["context"]
        r = await client.get(f"/v1/namespaces/default/sessions/{session}/observations", headers=tenant_b.headers)
        assert r.status_code == 404 and r.json()["code"] == "session_not_found"
        # A hard forget of the session takes its observation with it.
        async with mcp_session(base_url, tenant_a.key) as a:
            await call(a, "memory_forget", session_id=session, hard=True)
            assert (await fails(a, "memory_get_observations", session_id=session)).startswith("session_not_found:")
