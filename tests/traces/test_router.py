"""Reasoning traces over REST: start a trace, record steps, complete it, read, list, search and delete
it; steps numbered safely under concurrency; secrets refused; tenants and namespaces isolated; bad
input answered with problem JSON, never a 500.

Runs against the real app: embedded PostgreSQL, Redis and the MiniLM embedding model."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from memvault.api import NamespaceAPI
from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.openai import OpenAIEmbedder
from tests.conftest import Tenant, running
from tests.memories.test_router import problem

TRACES = "/v1/namespaces/default/traces"
SEARCH = f"{TRACES}/search"
MISSING_ID = "00000000-0000-4000-8000-000000000000"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"

DEPLOY = "deploy the web app to staging"
BREAD = "bake a sourdough loaf with a crisp crust"
TAXES = "file the quarterly sales tax return"


def url(trace_id: str, suffix: str = "") -> str:
    return f"{TRACES}/{trace_id}{suffix}"


async def start(client: httpx.AsyncClient, tenant: Tenant, task: str, **fields: Any) -> dict[str, Any]:
    r = await client.post(TRACES, json={"task": task, **fields}, headers=tenant.headers)
    assert r.status_code == 201, r.text
    return r.json()


async def step(client: httpx.AsyncClient, tenant: Tenant, trace_id: str, **fields: Any) -> dict[str, Any]:
    r = await client.post(url(trace_id, "/steps"), json=fields, headers=tenant.headers)
    assert r.status_code == 201, r.text
    return r.json()


async def complete(
    client: httpx.AsyncClient, tenant: Tenant, trace_id: str, outcome: str, success: bool = True
) -> dict[str, Any]:
    r = await client.post(
        url(trace_id, "/complete"), json={"outcome": outcome, "success": success}, headers=tenant.headers
    )
    assert r.status_code == 200, r.text
    return r.json()


async def search(client: httpx.AsyncClient, tenant: Tenant, query: str, **body: Any) -> dict[str, Any]:
    r = await client.post(SEARCH, json={"query": query, **body}, headers=tenant.headers)
    assert r.status_code == 200, r.text
    return r.json()


async def listed(client: httpx.AsyncClient, tenant: Tenant, params: Any = None) -> list[dict[str, Any]]:
    r = await client.get(TRACES, params=params, headers=tenant.headers)
    assert r.status_code == 200, r.text
    return r.json()["data"]


async def audit_actions(client: httpx.AsyncClient, tenant: Tenant) -> list[dict[str, Any]]:
    r = await client.get("/v1/audit", params={"action": "trace"}, headers=tenant.headers)
    assert r.status_code == 200, r.text
    return r.json()["data"]


async def row_counts(api: NamespaceAPI, tenant: Tenant) -> dict[str, int]:
    """Rows this tenant has, as the application role sees them (row-level security applies)."""
    async with api._db.tenant_tx(tenant.id) as tx:
        return {
            table: (await tx.session.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one()
            for table in ("traces", "trace_steps")
        }


# ---- lifecycle ------------------------------------------------------------------------------


class TestLifecycle:
    async def test_start_three_steps_complete(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        t = await start(client, tenant_a, DEPLOY, user_id="u1", agent_id="ops-bot", metadata={"repo": "web"})
        assert t["status"] == "open"
        assert (t["task"], t["user_id"], t["agent_id"], t["metadata"]) == (DEPLOY, "u1", "ops-bot", {"repo": "web"})
        assert (t["step_count"], t["outcome"], t["success"], t["completed_at"]) == (0, None, None, None)
        assert t["namespace"] == "default" and t["embedding_model"] == MODEL

        s1 = await step(client, tenant_a, t["id"], thought="Build first", action="run the build")
        s2 = await step(
            client,
            tenant_a,
            t["id"],
            tool_name="shell",
            tool_args={"cmd": "make deploy ENV=staging"},
            tool_result={"exit": 0, "stdout": "deployed"},
        )
        s3 = await step(client, tenant_a, t["id"], observation="staging answers 200", tool_result="ok")
        assert [s1["seq"], s2["seq"], s3["seq"]] == [1, 2, 3]

        done = await complete(client, tenant_a, t["id"], "The app is live on staging", success=True)
        assert (done["status"], done["outcome"], done["success"], done["step_count"]) == (
            "completed",
            "The app is live on staging",
            True,
            3,
        )
        assert done["completed_at"] is not None

        r = await client.get(url(t["id"]), headers=tenant_a.headers)
        assert r.status_code == 200, r.text
        got = r.json()
        assert got["status"] == "completed"
        assert [s["seq"] for s in got["steps"]] == [1, 2, 3]
        assert got["steps"][0] | {"at": None} == {
            "seq": 1,
            "thought": "Build first",
            "action": "run the build",
            "observation": None,
            "tool_name": None,
            "tool_args": None,
            "tool_result": None,
            "at": None,
        }
        assert got["steps"][1]["tool_args"] == {"cmd": "make deploy ENV=staging"}
        assert got["steps"][1]["tool_result"] == {"exit": 0, "stdout": "deployed"}
        assert got["steps"][2]["tool_result"] == "ok"

    async def test_every_change_is_audited_without_content(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        t = await start(client, tenant_a, DEPLOY)
        await step(client, tenant_a, t["id"], thought="a private thought")
        await complete(client, tenant_a, t["id"], "a private outcome")
        assert (await client.delete(url(t["id"]), headers=tenant_a.headers)).status_code == 204

        entries = await audit_actions(client, tenant_a)

        assert [e["action"] for e in entries] == ["trace.delete", "trace.complete", "trace.step", "trace.start"]
        assert {e["target_id"] for e in entries} == {t["id"]}
        assert entries[2]["detail"] == {"seq": 1}
        text_of_log = str(entries)
        assert "private" not in text_of_log and "staging" not in text_of_log

    async def test_a_completed_trace_takes_no_steps(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        t = await start(client, tenant_a, DEPLOY)
        await step(client, tenant_a, t["id"], thought="one")
        await complete(client, tenant_a, t["id"], "done")

        r = await client.post(url(t["id"], "/steps"), json={"thought": "late"}, headers=tenant_a.headers)

        problem(r, 409, "trace_completed")
        got = (await client.get(url(t["id"]), headers=tenant_a.headers)).json()
        assert got["step_count"] == 1 and len(got["steps"]) == 1

    async def test_completing_twice_conflicts(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        t = await start(client, tenant_a, DEPLOY)
        await complete(client, tenant_a, t["id"], "first outcome", success=True)

        r = await client.post(
            url(t["id"], "/complete"), json={"outcome": "second", "success": False}, headers=tenant_a.headers
        )

        problem(r, 409, "trace_completed")
        got = (await client.get(url(t["id"]), headers=tenant_a.headers)).json()
        assert (got["outcome"], got["success"]) == ("first outcome", True)

    async def test_concurrent_completions_let_exactly_one_win(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        t = await start(client, tenant_a, DEPLOY)

        rs = await asyncio.gather(
            *(
                client.post(
                    url(t["id"], "/complete"), json={"outcome": f"o{i}", "success": True}, headers=tenant_a.headers
                )
                for i in range(4)
            )
        )

        assert sorted(r.status_code for r in rs) == [200, 409, 409, 409]

    async def test_concurrent_steps_get_distinct_numbers(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        t = await start(client, tenant_a, DEPLOY)

        rs = await asyncio.gather(
            *(
                client.post(url(t["id"], "/steps"), json={"thought": f"t{i}"}, headers=tenant_a.headers)
                for i in range(10)
            )
        )

        assert [r.status_code for r in rs] == [201] * 10, [r.text for r in rs]
        assert sorted(r.json()["seq"] for r in rs) == list(range(1, 11))
        got = (await client.get(url(t["id"]), headers=tenant_a.headers)).json()
        assert got["step_count"] == 10
        assert [s["seq"] for s in got["steps"]] == list(range(1, 11))
        assert sorted(s["thought"] for s in got["steps"]) == sorted(f"t{i}" for i in range(10))
        assert await row_counts(api, tenant_a) == {"traces": 1, "trace_steps": 10}

    async def test_delete_removes_the_trace_and_its_steps(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        t = await start(client, tenant_a, DEPLOY)
        for i in range(3):
            await step(client, tenant_a, t["id"], thought=f"t{i}")

        assert (await client.delete(url(t["id"]), headers=tenant_a.headers)).status_code == 204

        problem(await client.get(url(t["id"]), headers=tenant_a.headers), 404, "trace_not_found")
        problem(await client.delete(url(t["id"]), headers=tenant_a.headers), 404, "trace_not_found")
        r = await client.post(url(t["id"], "/steps"), json={"thought": "x"}, headers=tenant_a.headers)
        problem(r, 404, "trace_not_found")
        assert await row_counts(api, tenant_a) == {"traces": 0, "trace_steps": 0}
        assert (await search(client, tenant_a, DEPLOY))["results"] == []

    async def test_a_full_trace_takes_no_more_steps(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        t = await start(client, tenant_a, DEPLOY)
        # 1,000 steps over HTTP would be slow; the count is what the limit reads.
        async with api._db.tenant_tx(tenant_a.id) as tx:
            await tx.session.execute(text("UPDATE traces SET step_count = 1000 WHERE id = :id"), {"id": t["id"]})

        r = await client.post(url(t["id"], "/steps"), json={"thought": "one too many"}, headers=tenant_a.headers)

        problem(r, 409, "trace_too_long")
        assert await row_counts(api, tenant_a) == {"traces": 1, "trace_steps": 0}

    async def test_unknown_ids_are_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        problem(await client.get(url(MISSING_ID), headers=tenant_a.headers), 404, "trace_not_found")
        r = await client.post(url(MISSING_ID, "/steps"), json={"thought": "x"}, headers=tenant_a.headers)
        problem(r, 404, "trace_not_found")
        r = await client.post(
            url(MISSING_ID, "/complete"), json={"outcome": "x", "success": True}, headers=tenant_a.headers
        )
        problem(r, 404, "trace_not_found")
        problem(await client.delete(url(MISSING_ID), headers=tenant_a.headers), 404, "trace_not_found")


# ---- list -----------------------------------------------------------------------------------


class TestList:
    async def test_newest_first_with_cursor(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        ids = [(await start(client, tenant_a, f"task number {i}"))["id"] for i in range(5)]

        seen: list[str] = []
        cursor = None
        for _ in range(5):
            params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
            r = await client.get(TRACES, params=params, headers=tenant_a.headers)
            assert r.status_code == 200, r.text
            body = r.json()
            assert all("steps" not in t for t in body["data"])
            seen += [t["id"] for t in body["data"]]
            cursor = body["next_cursor"]
            if cursor is None:
                break

        assert seen == ids[::-1]

    async def test_filters(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        won = await start(client, tenant_a, "won", user_id="u1", agent_id="a1")
        lost = await start(client, tenant_a, "lost", user_id="u2", agent_id="a1")
        running = await start(client, tenant_a, "running", user_id="u1", agent_id="a2")
        await complete(client, tenant_a, won["id"], "fine", success=True)
        await complete(client, tenant_a, lost["id"], "broke", success=False)

        def ids(rows: list[dict[str, Any]]) -> set[str]:
            return {t["id"] for t in rows}

        assert ids(await listed(client, tenant_a, {"status": "open"})) == {running["id"]}
        assert ids(await listed(client, tenant_a, {"status": "completed"})) == {won["id"], lost["id"]}
        assert ids(await listed(client, tenant_a, {"success": "true"})) == {won["id"]}
        assert ids(await listed(client, tenant_a, {"success": "false"})) == {lost["id"]}
        assert ids(await listed(client, tenant_a, {"user_id": "u1"})) == {won["id"], running["id"]}
        assert ids(await listed(client, tenant_a, {"agent_id": "a1", "user_id": "u2"})) == {lost["id"]}

    async def test_bad_cursor(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        for cursor in ["garbage!", "bm90LWpzb24", "WyJub3QgYSBkYXRlIiwgIngiXQ"]:
            r = await client.get(TRACES, params={"cursor": cursor}, headers=tenant_a.headers)
            assert problem(r, 422, "validation_error")["field"] == "cursor"


# ---- search ---------------------------------------------------------------------------------


class TestSearch:
    async def test_finds_a_similar_task_by_meaning(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        deploy = await start(client, tenant_a, DEPLOY)
        await step(client, tenant_a, deploy["id"], action="run make deploy", tool_name="shell")
        await step(client, tenant_a, deploy["id"], observation="staging is green")
        await complete(client, tenant_a, deploy["id"], "released", success=True)
        await start(client, tenant_a, BREAD)
        await start(client, tenant_a, TAXES)

        out = await search(client, tenant_a, "how did we ship the site to the staging environment")

        results = out["results"]
        assert results[0]["trace"]["id"] == deploy["id"]
        assert results[0]["signals"]["dense_rank"] == 1
        assert results[0]["semantic_relevance"] > max(r["semantic_relevance"] for r in results[1:])
        assert results[0]["score"] > results[1]["score"]
        # The steps come along, so an agent can replay the procedure.
        assert [s["seq"] for s in results[0]["trace"]["steps"]] == [1, 2]
        assert results[0]["trace"]["steps"][0]["action"] == "run make deploy"
        assert out["metrics"]["backend_failures"] == []

    async def test_meaning_alone_when_no_word_is_shared(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        deploy = await start(client, tenant_a, DEPLOY)
        await start(client, tenant_a, BREAD)
        await start(client, tenant_a, TAXES)

        out = await search(client, tenant_a, "releasing our website to a pre-production server")

        top = out["results"][0]
        assert top["trace"]["id"] == deploy["id"]
        assert top["signals"]["lexical_rank"] is None and top["signals"]["dense_rank"] == 1

    async def test_rare_word_matches_by_words(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await start(client, tenant_a, DEPLOY)
        rare = await start(client, tenant_a, "recalibrate the zorblax adapter on the hub")
        await start(client, tenant_a, BREAD)

        out = await search(client, tenant_a, "zorblax")

        top = out["results"][0]
        assert top["trace"]["id"] == rare["id"]
        assert top["signals"]["lexical_rank"] == 1
        assert out["metrics"]["matched_by"]["lexical"] == 1

    @pytest.mark.parametrize("query", ["the and of", "a & b | !c:* (", "'; DROP TABLE traces; --"])
    async def test_odd_queries_are_answered(self, client: httpx.AsyncClient, tenant_a: Tenant, query: str) -> None:
        await start(client, tenant_a, DEPLOY)

        out = await search(client, tenant_a, query)

        assert out["metrics"]["backend_failures"] == []

    async def test_outcome_is_searchable(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        t = await start(client, tenant_a, "fix the flaky login test")
        await start(client, tenant_a, BREAD)
        await complete(client, tenant_a, t["id"], "root cause was a frobnicator timeout", success=True)

        out = await search(client, tenant_a, "frobnicator")

        assert out["results"][0]["trace"]["id"] == t["id"]
        assert out["results"][0]["signals"]["lexical_rank"] == 1

    async def test_success_and_status_filters(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        good = await start(client, tenant_a, "deploy the web app to staging, attempt two")
        bad = await start(client, tenant_a, "deploy the web app to staging, attempt one")
        running = await start(client, tenant_a, "deploy the web app to staging, attempt three")
        await complete(client, tenant_a, good["id"], "worked", success=True)
        await complete(client, tenant_a, bad["id"], "failed on migrations", success=False)
        query = "deploy to staging"

        def ids(out: dict[str, Any]) -> set[str]:
            return {r["trace"]["id"] for r in out["results"]}

        assert ids(await search(client, tenant_a, query)) == {good["id"], bad["id"], running["id"]}
        assert ids(await search(client, tenant_a, query, success=True)) == {good["id"]}
        assert ids(await search(client, tenant_a, query, success=False)) == {bad["id"]}
        assert ids(await search(client, tenant_a, query, status="open")) == {running["id"]}
        assert ids(await search(client, tenant_a, query, status="completed")) == {good["id"], bad["id"]}

    async def test_owner_filters_and_limit(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        mine = await start(client, tenant_a, DEPLOY, user_id="u1", agent_id="a1")
        await start(client, tenant_a, DEPLOY, user_id="u2", agent_id="a1")
        await start(client, tenant_a, DEPLOY, user_id="u1", agent_id="a2")

        out = await search(client, tenant_a, DEPLOY, user_id="u1", agent_id="a1")
        assert [r["trace"]["id"] for r in out["results"]] == [mine["id"]]
        assert len((await search(client, tenant_a, DEPLOY, limit=2))["results"]) == 2
        assert len((await search(client, tenant_a, DEPLOY))["results"]) == 3


# ---- embedder down --------------------------------------------------------------------------


@pytest.fixture
async def failing_client(settings: Settings, pg_urls: DatabaseUrls) -> AsyncIterator[httpx.AsyncClient]:
    """The app with an embedding provider nobody answers for (port 9 on loopback refuses)."""
    emb = OpenAIEmbedder("text-embedding-3-small", base_url="http://127.0.0.1:9/v1", api_key=None, dim=384)
    application = create_app(settings, urls=pg_urls, embedder=emb)
    async with running(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test") as c:
            yield c
    await emb.aclose()


class TestWithoutEmbeddings:
    async def test_search_falls_back_to_words(
        self, client: httpx.AsyncClient, failing_client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        deploy = await start(client, tenant_a, DEPLOY)
        await start(client, tenant_a, BREAD)

        out = await search(failing_client, tenant_a, "staging deploy")

        assert [r["trace"]["id"] for r in out["results"]] == [deploy["id"]]
        [hit] = out["results"]
        assert hit["semantic_relevance"] is None and hit["signals"]["dense_rank"] is None
        assert hit["score"] == 1.0
        assert out["metrics"]["backend_failures"] == ["embedding"]
        assert out["metrics"]["matched_by"] == {"dense": 0, "lexical": 1}

    async def test_a_trace_is_still_recorded_and_embedded_on_completion(
        self, client: httpx.AsyncClient, failing_client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        r = await failing_client.post(TRACES, json={"task": DEPLOY}, headers=tenant_a.headers)
        assert r.status_code == 201, r.text
        t = r.json()
        assert t["embedding_model"] is None
        await step(failing_client, tenant_a, t["id"], thought="go")

        done = await complete(client, tenant_a, t["id"], "released", success=True)

        assert done["embedding_model"] == MODEL
        out = await search(client, tenant_a, "releasing our website to a pre-production server")
        assert out["results"][0]["trace"]["id"] == t["id"]
        assert out["results"][0]["signals"]["dense_rank"] == 1


# ---- secrets --------------------------------------------------------------------------------


ENV_DUMP = f"PATH=/usr/bin\nHOME=/root\nGITHUB_TOKEN={SECRET}\n"


class TestSecrets:
    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"tool_result": {"stdout": ENV_DUMP}}, "tool_result.stdout"),
            ({"tool_result": ENV_DUMP}, "tool_result"),
            ({"tool_args": {"headers": {"token": SECRET}}}, "tool_args.headers.token"),
            ({"thought": f"use {SECRET}"}, "thought"),
            ({"action": f"export GITHUB_TOKEN={SECRET}"}, "action"),
            ({"observation": f"got {SECRET}"}, "observation"),
        ],
    )
    async def test_a_secret_in_a_step_writes_nothing(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, body: dict[str, Any], field: str
    ) -> None:
        t = await start(client, tenant_a, DEPLOY)

        r = await client.post(url(t["id"], "/steps"), json=body, headers=tenant_a.headers)

        assert problem(r, 422, "secret_detected")["field"] == field
        assert SECRET not in r.text
        got = (await client.get(url(t["id"]), headers=tenant_a.headers)).json()
        assert (got["step_count"], got["steps"]) == (0, [])
        assert await row_counts(api, tenant_a) == {"traces": 1, "trace_steps": 0}
        assert "trace.step" not in [e["action"] for e in await audit_actions(client, tenant_a)]

    @pytest.mark.parametrize(
        ("body", "field"),
        [({"task": f"rotate {SECRET}"}, "task"), ({"task": DEPLOY, "metadata": {"env": ENV_DUMP}}, "metadata.env")],
    )
    async def test_a_secret_in_a_new_trace_writes_nothing(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, body: dict[str, Any], field: str
    ) -> None:
        r = await client.post(TRACES, json=body, headers=tenant_a.headers)

        assert problem(r, 422, "secret_detected")["field"] == field
        assert await row_counts(api, tenant_a) == {"traces": 0, "trace_steps": 0}

    async def test_a_secret_in_the_outcome_leaves_the_trace_open(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        t = await start(client, tenant_a, DEPLOY)

        r = await client.post(
            url(t["id"], "/complete"),
            json={"outcome": f"token was {SECRET}", "success": True},
            headers=tenant_a.headers,
        )

        assert problem(r, 422, "secret_detected")["field"] == "outcome"
        got = (await client.get(url(t["id"]), headers=tenant_a.headers)).json()
        assert (got["status"], got["outcome"]) == ("open", None)


# ---- isolation ------------------------------------------------------------------------------


class TestIsolation:
    async def test_other_tenant_sees_nothing(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        t = await start(client, tenant_a, DEPLOY)
        await step(client, tenant_a, t["id"], thought="mine")
        b = tenant_b.headers

        problem(await client.get(url(t["id"]), headers=b), 404, "trace_not_found")
        assert await listed(client, tenant_b) == []
        assert (await search(client, tenant_b, DEPLOY))["results"] == []
        assert (await search(client, tenant_b, "deploy"))["results"] == []
        r = await client.post(url(t["id"], "/steps"), json={"thought": "theirs"}, headers=b)
        problem(r, 404, "trace_not_found")
        r = await client.post(url(t["id"], "/complete"), json={"outcome": "x", "success": False}, headers=b)
        problem(r, 404, "trace_not_found")
        problem(await client.delete(url(t["id"]), headers=b), 404, "trace_not_found")

        got = (await client.get(url(t["id"]), headers=tenant_a.headers)).json()
        assert (got["status"], got["step_count"]) == ("open", 1)
        assert await row_counts(api, tenant_b) == {"traces": 0, "trace_steps": 0}

    async def test_other_namespace_sees_nothing(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post("/v1/namespaces", json={"name": "other"}, headers=tenant_a.headers)
        assert r.status_code == 201, r.text
        t = await start(client, tenant_a, DEPLOY)
        other = "/v1/namespaces/other/traces"

        problem(await client.get(f"{other}/{t['id']}", headers=tenant_a.headers), 404, "trace_not_found")
        assert (await client.get(other, headers=tenant_a.headers)).json()["data"] == []
        r = await client.post(f"{other}/search", json={"query": DEPLOY}, headers=tenant_a.headers)
        assert r.json()["results"] == []
        r = await client.post(f"{other}/{t['id']}/steps", json={"thought": "x"}, headers=tenant_a.headers)
        problem(r, 404, "trace_not_found")
        problem(await client.delete(f"{other}/{t['id']}", headers=tenant_a.headers), 404, "trace_not_found")

    async def test_namespace_limited_key_is_refused(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        t = await start(client, tenant_a, DEPLOY)
        r = await client.post(
            "/v1/keys",
            json={"name": "limited", "scopes": ["read", "write"], "namespaces": ["other"]},
            headers=tenant_a.headers,
        )
        assert r.status_code == 201, r.text
        h = {"Authorization": f"Bearer {r.json()['key']}"}

        problem(await client.post(TRACES, json={"task": DEPLOY}, headers=h), 403, "forbidden")
        problem(await client.get(TRACES, headers=h), 403, "forbidden")
        problem(await client.get(url(t["id"]), headers=h), 403, "forbidden")
        problem(await client.post(SEARCH, json={"query": DEPLOY}, headers=h), 403, "forbidden")
        problem(await client.post(url(t["id"], "/steps"), json={"thought": "x"}, headers=h), 403, "forbidden")
        r = await client.post(url(t["id"], "/complete"), json={"outcome": "x", "success": True}, headers=h)
        problem(r, 403, "forbidden")
        problem(await client.delete(url(t["id"]), headers=h), 403, "forbidden")

    async def test_read_only_key_cannot_write(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        t = await start(client, tenant_a, DEPLOY)
        r = await client.post("/v1/keys", json={"name": "reader", "scopes": ["read"]}, headers=tenant_a.headers)
        assert r.status_code == 201, r.text
        h = {"Authorization": f"Bearer {r.json()['key']}"}

        assert (await client.get(url(t["id"]), headers=h)).status_code == 200
        assert (await client.post(SEARCH, json={"query": DEPLOY}, headers=h)).status_code == 200
        assert (await client.post(TRACES, json={"task": DEPLOY}, headers=h)).status_code == 403
        assert (await client.post(url(t["id"], "/steps"), json={"thought": "x"}, headers=h)).status_code == 403
        assert (await client.delete(url(t["id"]), headers=h)).status_code == 403

    async def test_no_key_is_401(self, client: httpx.AsyncClient) -> None:
        assert (await client.get(TRACES)).status_code == 401


# ---- bad input ------------------------------------------------------------------------------


class TestBadInput:
    @pytest.mark.parametrize(
        "body",
        [
            {},
            {"task": ""},
            {"task": "   "},
            {"task": "x" * 4001},
            {"task": "a\x00b"},
            {"task": 123},
            {"task": ["a"]},
            {"task": "ok", "colour": "red"},
            {"task": "ok", "user_id": ""},
            {"task": "ok", "user_id": "u" * 201},
            {"task": "ok", "metadata": "not an object"},
            {"task": "ok", "metadata": {"k": "a\x00b"}},
            {"task": "ok", "status": "completed"},
        ],
    )
    async def test_start(self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, body: Any) -> None:
        problem(await client.post(TRACES, json=body, headers=tenant_a.headers), 422, "validation_error")
        assert await row_counts(api, tenant_a) == {"traces": 0, "trace_steps": 0}

    @pytest.mark.parametrize(
        "body",
        [
            {},
            {"thought": None, "tool_result": None},
            {"thought": ""},
            {"thought": 123},
            {"thought": "a\x00b"},
            {"thought": "x" * 32_001},
            {"tool_name": "t" * 201},
            {"tool_args": {"a": "x\x00"}},
            {"tool_result": {"big": "x" * 70_000}},
            {"thought": "ok", "seq": 5},
        ],
    )
    async def test_step(self, client: httpx.AsyncClient, tenant_a: Tenant, body: Any) -> None:
        t = await start(client, tenant_a, DEPLOY)
        r = await client.post(url(t["id"], "/steps"), json=body, headers=tenant_a.headers)
        problem(r, 422, "validation_error")

    async def test_step_body_not_json_object(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        t = await start(client, tenant_a, DEPLOY)
        for content in [b"[1, 2]", b"not json", b'"a string"']:
            r = await client.post(
                url(t["id"], "/steps"),
                content=content,
                headers={**tenant_a.headers, "content-type": "application/json"},
            )
            assert 400 <= r.status_code < 500 and r.headers["content-type"].startswith("application/problem+json")

    @pytest.mark.parametrize(
        "body",
        [
            {},
            {"outcome": "done"},
            {"success": True},
            {"outcome": "", "success": True},
            {"outcome": "done", "success": "maybe"},
            {"outcome": "a\x00b", "success": True},
            {"outcome": "done", "success": True, "steps": []},
        ],
    )
    async def test_complete(self, client: httpx.AsyncClient, tenant_a: Tenant, body: Any) -> None:
        t = await start(client, tenant_a, DEPLOY)
        r = await client.post(url(t["id"], "/complete"), json=body, headers=tenant_a.headers)
        problem(r, 422, "validation_error")
        assert (await client.get(url(t["id"]), headers=tenant_a.headers)).json()["status"] == "open"

    @pytest.mark.parametrize(
        "body",
        [
            {},
            {"query": ""},
            {"query": "a\x00b"},
            {"query": "x" * 4001},
            {"query": "ok", "limit": 0},
            {"query": "ok", "limit": 51},
            {"query": "ok", "limit": "many"},
            {"query": "ok", "status": "paused"},
            {"query": "ok", "success": "maybe"},
            {"query": "ok", "user_id": "a\x00b"},
            {"query": "ok", "filters": {}},
        ],
    )
    async def test_search(self, client: httpx.AsyncClient, tenant_a: Tenant, body: Any) -> None:
        problem(await client.post(SEARCH, json=body, headers=tenant_a.headers), 422, "validation_error")

    @pytest.mark.parametrize(
        "params",
        [
            {"status": "paused"},
            {"success": "maybe"},
            {"limit": 0},
            {"limit": 201},
            {"user_id": "a\x00b"},
            {"agent_id": "u" * 201},
        ],
    )
    async def test_list(self, client: httpx.AsyncClient, tenant_a: Tenant, params: dict[str, Any]) -> None:
        problem(await client.get(TRACES, params=params, headers=tenant_a.headers), 422, "validation_error")

    async def test_bad_ids_and_namespaces(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        h = tenant_a.headers
        problem(await client.get(url("not-a-uuid"), headers=h), 422, "validation_error")
        problem(await client.post(url("123", "/steps"), json={"thought": "x"}, headers=h), 422, "validation_error")
        problem(await client.delete(url("nope"), headers=h), 422, "validation_error")
        problem(await client.get("/v1/namespaces/nope/traces", headers=h), 404, "namespace_not_found")
        r = await client.post("/v1/namespaces/nope/traces", json={"task": DEPLOY}, headers=h)
        problem(r, 404, "namespace_not_found")
        r = await client.post("/v1/namespaces/nope/traces/search", json={"query": "x"}, headers=h)
        problem(r, 404, "namespace_not_found")
        problem(await client.get(f"/v1/namespaces/nope/traces/{uuid.uuid4()}", headers=h), 404, "namespace_not_found")
