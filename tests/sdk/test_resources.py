"""Every resource method of MemVault and AsyncMemVault against the real server over HTTP."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

import memvault_sdk
from memvault.api import NamespaceAPI
from memvault.maintenance.schemas import OrganizeIn, Step
from memvault_sdk import AsyncMemVault, ConflictError, MemVault, NotFoundError
from memvault_sdk.types import (
    ApiKeyCreated,
    Context,
    Entity,
    EntityGraph,
    IngestResult,
    Job,
    Memory,
    MemoryCreate,
    MessageParam,
    SearchResponse,
    Status,
    TraceDetail,
)
from tests.conftest import Tenant
from tests.sdk.conftest import call, first_page, items


class TestMemories:
    async def test_create_get_update_history_delete(self, client: Any) -> None:
        m = await call(
            client.memories.create(
                "Ana prefers window seats",
                type="preference",
                key="seat",
                user_id="ana",
                metadata={"source": "chat"},
                importance=0.7,
            )
        )
        assert isinstance(m, Memory)
        assert (m.content, m.type, m.scope, m.user_id, m.metadata) == (
            "Ana prefers window seats",
            "preference",
            "user",
            "ana",
            {"source": "chat"},
        )
        assert (await call(client.memories.get(m.id))).id == m.id

        updated = await call(client.memories.update(m.id, importance=0.9, key=None))
        assert (updated.importance, updated.key) == (0.9, None)

        history = await call(client.memories.history(m.id))
        assert history.memory_id == m.id and history.changes
        assert history.changes[0].action == "created"

        assert await call(client.memories.delete(m.id)) is None
        with pytest.raises(NotFoundError):
            await call(client.memories.get(m.id))

    async def test_a_second_memory_with_the_same_key_supersedes(self, client: Any) -> None:
        first = await call(client.memories.create("Ana lives in Porto", key="home", user_id="ana"))
        second = await call(client.memories.create("Ana lives in Lisbon", key="home", user_id="ana"))
        assert second.supersedes == first.id
        assert [v.id for v in (await call(client.memories.history(second.id))).versions] == [first.id, second.id]

    async def test_create_many_takes_models_and_dicts(self, client: Any) -> None:
        made = await call(
            client.memories.create_many([MemoryCreate(content="Ana runs", user_id="ana"), {"content": "Bo swims"}])
        )
        assert [m.content for m in made] == ["Ana runs", "Bo swims"]
        assert all(isinstance(m, Memory) for m in made)

    async def test_list_filters(self, client: Any) -> None:
        await call(client.memories.create("Ana runs", type="fact", user_id="ana", metadata={"project": "x"}))
        await call(client.memories.create("Bo swims", type="note", user_id="bo"))
        page = await first_page(client.memories.list(type="fact", metadata={"project": "x"}))
        assert [m.content for m in page.data] == ["Ana runs"]
        assert page.next_cursor is None
        assert [m.content for m in await items(client.memories.list(user_id="bo", scope=["user"]))] == ["Bo swims"]

    async def test_a_date_range_in_list_and_search(self, client: Any) -> None:
        for year in (2021, 2023):
            await call(
                client.memories.create(f"Ana ran the Porto marathon in {year}", valid_from=datetime(year, 10, 1))
            )
        spring = {"since": datetime(2022, 1, 1, tzinfo=UTC), "until": datetime(2024, 1, 1, tzinfo=UTC)}

        assert [m.content for m in await items(client.memories.list(**spring))] == [
            "Ana ran the Porto marathon in 2023"
        ]
        found = await call(client.search("Porto marathon", filters=spring))
        assert [r.memory.content for r in found.results] == ["Ana ran the Porto marathon in 2023"]

    async def test_promote_and_archive(self, client: Any) -> None:
        m = await call(client.memories.create("Maybe Ana likes jazz", state="tentative"))
        assert (await call(client.memories.promote(m.id))).state == "stable"
        assert (await call(client.memories.archive(m.id))).state == "archived"
        assert await items(client.memories.list()) == []
        assert [x.id for x in await items(client.memories.list(include_archived=True))] == [m.id]

    async def test_link_and_unlink_entities(self, client: Any) -> None:
        m = await call(client.memories.create("Ana works at Acme"))
        ana = await call(client.entities.create("Ana", type="person"))
        linked = await call(client.memories.link_entities(m.id, [ana.id]))
        assert [e.id for e in linked.entities] == [ana.id]
        assert await call(client.memories.unlink_entity(m.id, ana.id)) is None
        graph = await call(client.entities.get(ana.id))
        assert graph.memories == []


class TestRecall:
    async def test_search(self, client: Any) -> None:
        m = await call(client.memories.create("Ana prefers window seats on long flights", user_id="ana"))
        await call(client.memories.create("The office coffee machine is broken"))
        found = await call(client.search("where does Ana like to sit?", limit=5, filters={"user_id": "ana"}))
        assert isinstance(found, SearchResponse)
        assert found.results[0].memory.id == m.id
        assert found.results[0].semantic_relevance is not None
        assert "embed" in found.metrics.timings_ms

    async def test_search_options_and_explanations(self, client: Any) -> None:
        turns = ["Shall we meet somewhere?", "The cafe on Rua Augusta at noon", "See you there"]
        for text in turns:
            await call(client.memories.create(text, session_id="meet"))

        found = await call(
            client.search(
                "cafe Rua Augusta",
                limit=1,
                filters={"session_id": "meet"},
                neighbours=1,
                fusion="rrf",
                weights={"dense": 0.5},
            )
        )

        top = found.results[0]
        assert top.memory.content == turns[1]
        assert [m.content for m in top.neighbours or []] == [turns[0], turns[2]]
        assert top.signals.channels["lexical"].rank == 1
        assert found.metrics.fusion == "rrf"
        assert found.metrics.weights["dense"] == 0.5
        assert found.metrics.stages == {"rewrite": "unconfigured", "rerank": "unconfigured"}

    async def test_context(self, client: Any) -> None:
        await call(client.memories.create("Ana prefers window seats", user_id="ana"))
        ctx = await call(client.context("seating", user_id="ana", token_budget=200))
        assert isinstance(ctx, Context)
        assert "Ana prefers window seats" in ctx.context
        assert ctx.tokens <= ctx.token_budget == 200


class TestEventsSessionsJobs:
    async def test_ingest_then_sessions_messages_and_the_job(self, client: Any) -> None:
        result = await call(
            client.events.ingest(
                [
                    MessageParam(role="user", content="Hi, I'm Ana. I moved to Lisbon last year."),
                    {"role": "assistant", "content": "Welcome to Lisbon, Ana!"},
                ],
                session_id="s1",
                user_id="ana",
            )
        )
        assert isinstance(result, IngestResult)
        assert len(result.event_ids) == 2 and result.sessions[0].id == "s1"

        sessions = await items(client.sessions.list(user_id="ana"))
        assert [s.id for s in sessions] == ["s1"]
        assert (await call(client.sessions.get("s1"))).message_count == 2
        newest = await first_page(client.sessions.messages("s1", order="desc", limit=1))
        assert [m.role for m in newest.data] == ["assistant"]
        assert [m.role for m in await items(client.sessions.messages("s1", role="user"))] == ["user"]

        job = await call(client.jobs.get(result.job_id))
        assert isinstance(job, Job) and job.kind == "extraction"
        done = await call(client.jobs.wait(result.job_id, timeout=120, poll_interval=0.2))
        assert done.status == "succeeded", done.error
        notes = await call(client.sessions.observations("s1"))
        assert notes.session_id == "s1" and notes.user_id == "ana" and notes.message_count == 2
        assert "Lisbon" in notes.topics and notes.job_id == str(result.job_id)

    async def test_a_session_id_with_a_slash(self, client: Any) -> None:
        await call(client.events.ingest([{"role": "user", "content": "hello"}], session_id="team/42"))
        assert (await call(client.sessions.get("team/42"))).id == "team/42"

    async def test_cancel_a_queued_job_then_a_finished_one(
        self, client: Any, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        # Queued through the session's app, whose jobs wait for an RQ worker: still queued when
        # the SDK's server (same database) is asked to cancel it.
        waiting = await api.organize(tenant_a.principal, "default", OrganizeIn(jobs=[Step.promote]))

        cancelled = await call(client.jobs.cancel(str(waiting.job_id)))

        assert isinstance(cancelled, Job) and cancelled.status == "cancelled" and cancelled.finished
        assert cancelled.cancel_requested_at is not None and cancelled.started_at is None
        assert (await call(client.jobs.cancel(str(waiting.job_id)))).status == "cancelled"  # again: harmless

        result = await call(client.events.ingest([{"role": "user", "content": "I love sushi."}], session_id="s2"))
        done = await call(client.jobs.wait(result.job_id, timeout=120, poll_interval=0.2))
        assert done.status == "succeeded", done.error
        with pytest.raises(ConflictError) as exc:
            await call(client.jobs.cancel(result.job_id))
        assert exc.value.code == "job_finished" and exc.value.status == 409
        with pytest.raises(NotFoundError):
            await call(client.jobs.cancel(str(uuid.uuid4())))


class TestEntitiesRelations:
    async def test_entity_lifecycle(self, client: Any) -> None:
        ana = await call(client.entities.create("Ana", type="person", aliases=["Ana S."]))
        assert isinstance(ana, Entity)
        with pytest.raises(ConflictError) as exc:
            await call(client.entities.create("ana", type="person"))
        assert exc.value.code == "entity_exists" and exc.value.body["existing_id"] == ana.id
        merged = await call(client.entities.create("Ana", type="person", aliases=["Annie"], upsert=True))
        assert merged.id == ana.id and set(merged.aliases) == {"Ana S.", "Annie"}
        assert [e.id for e in await items(client.entities.list(q="annie"))] == [ana.id]
        changed = await call(client.entities.update(ana.id, description="A pilot", aliases=["A."]))
        assert (changed.description, changed.aliases) == ("A pilot", ["A."])
        assert await call(client.entities.delete(ana.id)) is None
        with pytest.raises(NotFoundError):
            await call(client.entities.get(ana.id))

    async def test_relations_and_the_graph(self, client: Any) -> None:
        ana = await call(client.entities.create("Ana", type="person"))
        acme = await call(client.entities.create("Acme", type="organization"))
        rel = await call(client.relations.create(ana.id, "works_at", acme.id, confidence=0.9))
        assert (rel.source_id, rel.type, rel.target_id) == (ana.id, "works_at", acme.id)
        graph = await call(client.entities.get(ana.id, hops=1))
        assert isinstance(graph, EntityGraph)
        assert [n.entity.id for n in graph.neighbours] == [acme.id]
        assert [r.id for r in await items(client.relations.list(entity_id=acme.id))] == [rel.id]
        assert await call(client.relations.delete(rel.id)) is None
        assert await items(client.relations.list(entity_id=acme.id)) == []


class TestTraces:
    async def test_trace_lifecycle_and_search(self, client: Any) -> None:
        t = await call(client.traces.start("book a flight to Lisbon", user_id="ana"))
        step = await call(client.traces.step(t.id, thought="check dates", tool_name="calendar", tool_args={"m": 5}))
        assert step.seq == 1 and step.tool_args == {"m": 5}
        done = await call(client.traces.complete(t.id, outcome="booked TAP 123", success=True))
        assert (done.status, done.success) == ("completed", True)
        detail = await call(client.traces.get(t.id))
        assert isinstance(detail, TraceDetail) and [s.seq for s in detail.steps] == [1]
        assert [x.id for x in await items(client.traces.list(success=True))] == [t.id]
        found = await call(client.traces.search("flight booking", success=True))
        assert found.results[0].trace.id == t.id
        assert await call(client.traces.delete(t.id)) is None
        assert await items(client.traces.list()) == []


class TestForgetExportImport:
    async def test_forget_a_user(self, client: Any) -> None:
        await call(client.memories.create("Ana runs", user_id="ana"))
        await call(client.memories.create("Bo swims", user_id="bo"))
        out = await call(client.forget(user_id="ana", hard=True))
        assert (out.hard, out.selector, out.memories) == (True, "user_id", 1)
        assert [m.content for m in await items(client.memories.list())] == ["Bo swims"]

    async def test_export_then_import_into_another_namespace(self, client: Any) -> None:
        await call(client.memories.create("Ana runs", user_id="ana"))
        records = await call(client.export())
        assert records[0]["kind"] == "header" and records[-1]["kind"] == "end"
        ns = f"copy-{uuid.uuid4().hex[:6]}"
        await call(client.namespaces.create(ns))
        out = await call(client.import_(records, namespace=ns))
        assert out.imported["memory"] == 1
        assert [m.content for m in await items(client.memories.list(namespace=ns))] == ["Ana runs"]
        scoped = client.with_options(namespace=ns)
        assert [m.content for m in await items(scoped.memories.list())] == ["Ana runs"]


class TestAdmin:
    async def test_namespaces(self, client: Any) -> None:
        name = f"ns-{uuid.uuid4().hex[:6]}"
        made = await call(client.namespaces.create(name, description="for tests"))
        assert (made.name, made.description) == (name, "for tests")
        assert name in [n.name for n in await call(client.namespaces.list())]
        assert (await call(client.namespaces.get(name))).memory_count == 0
        assert await call(client.namespaces.delete(name)) is None
        with pytest.raises(NotFoundError):
            await call(client.namespaces.get(name))

    async def test_keys_and_audit(self, client: Any, server_url: str) -> None:
        created = await call(client.keys.create(name="reader", scopes=["read"]))
        assert isinstance(created, ApiKeyCreated) and created.key.startswith("mv_")
        assert created.id in [k.id for k in await items(client.keys.list())]
        with MemVault(api_key=created.key, base_url=server_url) as reader:
            assert reader.status().principal is not None
        assert (await call(client.keys.revoke(created.id))).revoked_at is not None
        actions = [e.action for e in await items(client.audit.list(action="key"))]
        assert actions[:2] == ["key.revoke", "key.create"]

    async def test_key_expiry_rotation_and_pages(self, client: Any, server_url: str) -> None:
        made = [await call(client.keys.create(name=f"bot {i}", scopes=["read"], expires_in_days=7)) for i in range(3)]
        assert all(k.expires_at is not None for k in made)
        first = await first_page(client.keys.list(limit=2))
        assert len(first.data) == 2 and first.next_cursor is not None
        listed = [k.id for k in await items(client.keys.list(limit=2))]
        assert len(listed) == len(set(listed)) and {k.id for k in made} <= set(listed)

        rotated = await call(client.keys.rotate(made[0].id, grace_seconds=600))
        assert rotated.id == made[0].id and rotated.key != made[0].key
        assert rotated.previous_prefix == made[0].prefix and rotated.previous_expires_at is not None
        for secret in (rotated.key, made[0].key):  # the old one within its grace period
            with MemVault(api_key=secret, base_url=server_url) as c:
                assert c.status().principal is not None

    async def test_account_and_grant_revocation(self, client: Any, tenant_a: Tenant) -> None:
        account = await call(client.account())
        assert account.tenant_id == str(tenant_a.id) and account.grants == [] and account.users == 0
        with pytest.raises(memvault_sdk.NotFoundError) as exc:
            await call(client.revoke_grant("00000000-0000-4000-8000-000000000000"))
        assert exc.value.status == 404

    async def test_status(self, client: Any, tenant_a: Tenant) -> None:
        status = await call(client.status())
        assert isinstance(status, Status) and status.database.ok
        assert status.principal is not None and status.principal.tenant_id == str(tenant_a.id)


class TestIsolation:
    async def test_another_tenant_sees_nothing(self, client: Any, tenant_b: Tenant, server_url: str) -> None:
        m = await call(client.memories.create("Ana runs", user_id="ana"))
        async with AsyncMemVault(api_key=tenant_b.key, base_url=server_url) as other:
            with pytest.raises(NotFoundError):
                await other.memories.get(m.id)
            assert [x async for x in other.memories.list()] == []
            assert (await other.search("Ana runs")).results == []
