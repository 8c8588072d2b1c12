"""The remote MCP endpoint through the official `mcp` SDK client, over real HTTP (uvicorn on
127.0.0.1): discovery, the store → search → context → forget flow, errors as tool results,
tenant isolation and scopes, resources and prompts."""

from __future__ import annotations

import json
import uuid

import httpx
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.conftest import Tenant
from tests.mcp.conftest import call, fails, mcp_session

CORE = {"memory_store", "memory_search", "memory_get_context", "memory_forget", "memory_status"}
EXTENDED = CORE | {
    "memory_ingest",
    "memory_get",
    "memory_update",
    "memory_list",
    "memory_history",
    "memory_promote",
    "memory_archive",
    "memory_organize",
    "entity_add",
    "entity_get",
    "entity_relate",
    "entity_paths",
    "entity_related",
    "memory_find_entity",
    "memory_export_graph",
    "session_list",
    "session_messages",
    "trace_start",
    "trace_step",
    "trace_complete",
    "memory_account",
    "memory_setup",
    "memory_get_observations",
    "memory_job_status",
    "memory_add_preference",
    "memory_add_fact",
    "memory_mark_contradiction",
    "memory_resolve_contradiction",
}


class TestDiscovery:
    async def test_initialize_lists_tools_resources_prompts(self, base_url: str, tenant_a: Tenant) -> None:
        async with (
            create_mcp_http_client(headers=tenant_a.headers) as http,
            streamable_http_client(f"{base_url}/mcp/extended", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            assert init.server_info.name == "memvault"
            assert "memory_get_context" in (init.instructions or "")
            assert "Never store secrets" in (init.instructions or "")
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools) == EXTENDED
            store = tools["memory_store"]
            assert store.annotations is not None and store.annotations.read_only_hint is False
            assert tools["memory_search"].annotations.read_only_hint is True  # type: ignore[union-attr]
            assert tools["memory_forget"].annotations.destructive_hint is True  # type: ignore[union-attr]
            assert store.output_schema is not None and "content" in store.output_schema["properties"]
            assert "content" in store.input_schema["required"]
            resources = {str(r.uri) for r in (await session.list_resources()).resources}
            assert {
                "memory://health",
                "memory://stats",
                "memory://graph/stats",
                "memory://entities",
                "memory://preferences",
            } <= resources
            templates = {t.uri_template for t in (await session.list_resource_templates()).resource_templates}
            assert {"memory://memories/{memory_id}", "memory://context/{session_id}"} <= templates
            prompts = {p.name for p in (await session.list_prompts()).prompts}
            assert prompts == {"memory-conversation", "memory-review", "memory-reasoning", "memory-setup"}

    async def test_mcp_with_and_without_slash_no_redirect(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key, "/mcp/") as session:
            assert (await call(session, "memory_status"))["tenant_id"] == str(tenant_a.id)
        async with httpx.AsyncClient() as raw:
            for path in ("/mcp", "/mcp/core/", "/mcp/extended/"):
                r = await raw.post(f"{base_url}{path}", json={}, headers=tenant_a.headers)
                assert r.status_code not in (301, 302, 307, 308, 404), path


class TestProfiles:
    """A client picks its tools per connection; plain /mcp serves the small default."""

    async def test_each_connection_gets_its_profile(self, base_url: str, tenant_a: Tenant) -> None:
        for path, expected in (
            ("/mcp", CORE),
            ("/mcp/", CORE),
            ("/mcp/core", CORE),
            ("/mcp/extended", EXTENDED),
            ("/mcp/extended/", EXTENDED),
            ("/mcp?profile=extended", EXTENDED),
            ("/mcp/extended?profile=core", CORE),  # the query wins: the stdio bridge relies on it
        ):
            async with mcp_session(base_url, tenant_a.key, path) as s:
                assert {t.name for t in (await s.list_tools()).tools} == expected, path
                prompts = {p.name for p in (await s.list_prompts()).prompts}
                # The review prompt works with extended tools; a core client is not offered it.
                assert prompts == (
                    {"memory-conversation"}
                    if expected == CORE
                    else {"memory-conversation", "memory-review", "memory-reasoning", "memory-setup"}
                )

    async def test_both_profiles_serve_the_same_memories(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key, "/mcp/core") as core:
            stored = await call(core, "memory_store", content="Ana's dentist is Dr Sousa", user_id="ana")
            # An extended-only tool is not there for this connection.
            assert "Unknown tool" in await fails(core, "memory_get", memory_id=stored["id"])
        async with mcp_session(base_url, tenant_a.key, "/mcp/extended") as ext:
            assert (await call(ext, "memory_get", memory_id=stored["id"]))["content"] == stored["content"]

    async def test_an_unknown_profile_is_refused_by_name(self, base_url: str, tenant_a: Tenant) -> None:
        async with httpx.AsyncClient() as raw:
            r = await raw.post(f"{base_url}/mcp?profile=full", json={}, headers=tenant_a.headers)
        assert r.status_code == 422 and r.json()["code"] == "validation_error" and "'full'" in r.json()["detail"]

    async def test_every_profile_path_asks_for_credentials(self, base_url: str) -> None:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        async with httpx.AsyncClient() as raw:
            for path in ("/mcp/core", "/mcp/extended", "/mcp?profile=extended"):
                r = await raw.post(f"{base_url}{path}", json=ping)
                assert r.status_code == 401 and "resource_metadata=" in r.headers["www-authenticate"], path


class TestFlow:
    async def test_store_search_context_forget(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            stored = await call(
                s,
                "memory_store",
                content="Ana prefers window seats on long flights",
                type="preference",
                key="seat",
                user_id="ana",
                speaker="Ana",
            )
            assert stored["scope"] == "user" and stored["metadata"] == {"speaker": "Ana"}

            found = await call(s, "memory_search", query="where does Ana like to sit on planes?", user_id="ana")
            assert found["results"][0]["id"] == stored["id"] and found["results"][0]["content"] == stored["content"]

            ctx = await call(s, "memory_get_context", user_id="ana", query="travel plans")
            assert "Ana prefers window seats" in ctx["context"] and stored["id"] in ctx["memory_ids"]
            assert ctx["tokens"] <= ctx["token_budget"]

            queued = await call(s, "memory_organize", jobs=["dedup"], budget_ms=5000)
            assert queued["job_id"] and queued["jobs"] == ["dedup"]

            got = await call(s, "memory_get", memory_id=stored["id"])
            assert got["content"] == stored["content"]

            gone = await call(s, "memory_forget", user_id="ana", hard=True)
            assert gone["memories"] == 1
            assert (await call(s, "memory_search", query="window seats", user_id="ana"))["results"] == []

    async def test_search_filters_reach_the_engine(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            turns = ["We should pick a venue", "The old boathouse by the river is free in June", "Book it then"]
            for i, text in enumerate(turns):
                await call(s, "memory_store", content=text, session_id="plan", valid_from=f"2026-05-0{i + 1}T10:00:00Z")
            await call(s, "memory_store", content="Decided: the boathouse", type="decision", session_id="plan")

            dated = await call(
                s,
                "memory_search",
                query="pick a venue and book it",
                session_id="plan",
                since="2026-05-02T00:00:00Z",
                until="2026-05-03T00:00:00Z",
            )
            assert [r["content"] for r in dated["results"]] == [turns[1]]
            assert dated["results"][0]["date"] == "2026-05-02"
            decided = await call(s, "memory_search", query="boathouse", session_id="plan", types=["decision"])
            assert [r["content"] for r in decided["results"]] == ["Decided: the boathouse"]
            later = await call(s, "memory_list", session_id="plan", since="2026-05-02T00:00:00Z")
            assert [m["content"] for m in later["data"]][-2:] == [turns[2], turns[1]]
            bad = await fails(s, "memory_search", query="x", since="2026-05-02T00:00:00Z", until="2026-05-01T00:00:00Z")
            assert bad.startswith("validation_error")

    async def test_a_hit_is_lean_unless_explained(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key, "/mcp") as s:
            stored = await call(s, "memory_store", content="Ana takes oat milk", key="milk", user_id="ana")
            result = await s.call_tool("memory_search", {"query": "what milk does Ana take?", "user_id": "ana"})
            hit = result.structured_content["results"][0]  # type: ignore[index]
            assert hit.keys() == {"id", "content", "type", "date", "score", "key"}
            assert (hit["id"], hit["key"], hit["type"]) == (stored["id"], "milk", "fact")
            assert 0 < hit["score"] <= 1
            # The text a model reads is the same JSON, on one line.
            assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]

            explained = await call(s, "memory_search", query="what milk does Ana take?", user_id="ana", explain=True)
            top = explained["results"][0]
            assert top["scope"] == "user" and top["user_id"] == "ana" and top["semantic_relevance"] > 0.3
            assert "dense" in top["signals"]["channels"] and explained["metrics"]["fusion"] == "weighted"

    async def test_an_explained_hit_that_no_word_matched_keeps_its_nulls(self, base_url: str, tenant_a: Tenant) -> None:
        """`explain: true` dropped every null, those the output schema requires too (the lexical rank
        of a hit found by meaning alone), and the SDK's check of that schema failed the search."""
        async with mcp_session(base_url, tenant_a.key, "/mcp") as s:
            await call(s, "memory_store", content="Ana takes oat milk", user_id="ana")
            explained = await call(
                s, "memory_search", query="what does she drink in the morning?", user_id="ana", explain=True
            )
        signals = explained["results"][0]["signals"]
        assert signals["dense_rank"] == 1 and signals["lexical_rank"] is None and signals["lexical_score"] is None
        assert "hop" not in signals  # a null the schema may leave out still goes

    async def test_ranking_knobs_are_not_tool_arguments(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
        arguments = set(tools["memory_search"].input_schema["properties"])
        assert {"query", "limit", "user_id", "session_id", "types", "since", "until", "knowledge_at"} <= arguments
        assert {"valid_at", "explain"} <= arguments
        assert not arguments & {"weights", "fusion", "rerank", "rewrite", "neighbours", "reference_time"}

    async def test_context_reads_as_markdown(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key, "/mcp") as s:
            stored = await call(s, "memory_store", content="Ana is training for the Lisbon marathon", user_id="ana")
            result = await s.call_tool("memory_get_context", {"user_id": "ana"})
            text = result.content[0].text  # type: ignore[union-attr]
            assert "Ana is training for the Lisbon marathon" in text and not text.startswith("{")
            assert stored["id"] in result.structured_content["memory_ids"]  # type: ignore[index]

    async def test_ingest_and_read_the_session(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            out = await call(
                s,
                "memory_ingest",
                session_id="chat-1",
                user_id="ana",
                messages=[{"role": "user", "content": "I moved to Porto"}, {"role": "assistant", "content": "Noted"}],
            )
            assert out["job_id"] and len(out["event_ids"]) == 2
            page = await call(s, "session_messages", session_id="chat-1")
            assert [m["content"] for m in page["data"]] == ["I moved to Porto", "Noted"]

    async def test_resources_and_prompts(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            stored = await call(s, "memory_store", content="Standup is at 9:30", session_id="s-7")
            health = await s.read_resource("memory://health")
            assert json.loads(health.contents[0].text)["database"] is True  # type: ignore[union-attr]
            stats = json.loads((await s.read_resource("memory://stats")).contents[0].text)  # type: ignore[union-attr]
            assert stats["namespaces"]["default"]["memories"]["by_type"] == {"fact": 1}
            one = await s.read_resource(f"memory://memories/{stored['id']}")
            assert json.loads(one.contents[0].text)["content"] == "Standup is at 9:30"  # type: ignore[union-attr]
            block = await s.read_resource("memory://context/s-7")
            assert "Standup is at 9:30" in block.contents[0].text  # type: ignore[union-attr]
            prompt = await s.get_prompt("memory-conversation", {"user_id": "ana", "topic": "travel"})
            assert "memory_get_context" in prompt.messages[0].content.text  # type: ignore[union-attr]


class TestErrors:
    async def test_a_secret_in_any_stored_field_is_refused(self, base_url: str, tenant_a: Tenant) -> None:
        # The guard runs in the request models (fields.Body), so the MCP door refuses what REST does.
        aws_id = "AK" + "IA" + "IOSFODNN7EXAMPLE"
        async with mcp_session(base_url, tenant_a.key) as s:
            for field in ("key", "user_id", "agent_id", "session_id"):
                text = await fails(s, "memory_store", content="seat 4A", **{field: f"id {aws_id}"})
                assert text.startswith("secret_detected") and f"(field: {field})" in text and aws_id not in text
            text = await fails(s, "trace_start", task="deploy", user_id=f"id {aws_id}")
            assert text.startswith("secret_detected") and aws_id not in text
            listed = await call(s, "memory_list")
        assert aws_id not in json.dumps(listed)

    async def test_each_kind_is_a_readable_tool_error(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            assert (await fails(s, "memory_store", content="   ")).startswith("validation_error")
            assert (await fails(s, "memory_get", memory_id="00000000-0000-4000-8000-000000000000")).startswith(
                "memory_not_found"
            )
            secret = "my key is AKIA" + "IOSFODNN7EXAMPLE"
            text = await fails(s, "memory_store", content=secret)
            assert text.startswith("secret_detected") and "IOSFODNN7EXAMPLE" not in text
            assert (await fails(s, "memory_search", query="x", namespace="nope")).startswith("namespace_not_found")
            # Arguments that break the input schema are refused before the tool body runs, naming the field.
            bad_id = await fails(s, "memory_forget", memory_id="x")
            assert "memory_id" in bad_id and "UUID" in bad_id
            assert (await fails(s, "memory_forget", memory_id=str(uuid.uuid4()), user_id="ana")).startswith(
                "validation_error"
            )

    async def test_missing_or_bad_credentials_get_401_with_a_challenge(self, base_url: str) -> None:
        async with httpx.AsyncClient() as raw:
            r = await raw.post(f"{base_url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
            assert r.json()["code"] == "missing_credentials"
            r = await raw.post(f"{base_url}/mcp", json={}, headers={"Authorization": "Bearer mv_" + "x" * 40})
            assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]

    async def test_foreign_origin_is_refused(self, base_url: str, tenant_a: Tenant) -> None:
        async with httpx.AsyncClient() as raw:
            r = await raw.post(
                f"{base_url}/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={**tenant_a.headers, "Origin": "https://evil.example", "Accept": "application/json"},
            )
            assert r.status_code == 403


class TestIsolation:
    async def test_other_tenant_sees_nothing(self, base_url: str, tenant_a: Tenant, tenant_b: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as a:
            mine = await call(a, "memory_store", content="Tenant A's launch date is May 3")
        async with mcp_session(base_url, tenant_b.key) as b:
            assert (await call(b, "memory_search", query="launch date"))["results"] == []
            assert (await fails(b, "memory_get", memory_id=mine["id"])).startswith("memory_not_found")
            assert (await fails(b, "memory_forget", memory_id=mine["id"], hard=True)).startswith("memory_not_found")
            assert (await call(b, "memory_list"))["data"] == []

    async def test_read_key_cannot_store_and_limited_key_stays_in_its_namespace(
        self, base_url: str, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        r = await client.post("/v1/keys", json={"scopes": ["read"]}, headers=tenant_a.headers)
        async with mcp_session(base_url, r.json()["key"]) as s:
            assert (await fails(s, "memory_store", content="x")).startswith("forbidden")
            await call(s, "memory_search", query="anything")
        await client.post("/v1/namespaces", json={"name": "ops"}, headers=tenant_a.headers)
        r = await client.post(
            "/v1/keys",
            json={"scopes": ["read", "write"], "namespaces": ["ops"], "default_namespace": "ops"},
            headers=tenant_a.headers,
        )
        async with mcp_session(base_url, r.json()["key"]) as s:
            stored = await call(s, "memory_store", content="Ops rotate on-call on Mondays")
            assert stored["namespace"] == "ops"  # the key's default namespace
            assert (await fails(s, "memory_search", query="x", namespace="default")).startswith("forbidden")
