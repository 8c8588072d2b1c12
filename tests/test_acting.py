"""The binding of a signed-in user (acting.py) at the facade, where every door passes: the rules
the MCP tests exercise over OAuth, here for the cases no tool reaches."""

from __future__ import annotations

import pytest

from memvault.api import NamespaceAPI
from memvault.contradictions.schemas import ContradictionIn, PairResolutionIn, Resolution
from memvault.entities.schemas import EntityIn
from memvault.errors import InvalidInput, NotFound
from memvault.events.schemas import EventsIn, MessageIn, Role
from memvault.events.service import SessionNotFound
from memvault.memories.schemas import MemoryFilters, MemoryIn, MemoryPatch, ScopeLevel
from memvault.observations.service import ObservationNotFound
from memvault.principal import ACT_AS, Principal, UserMismatch
from memvault.retrieval.context import ContextIn
from memvault.retrieval.kinds import Kind
from memvault.retrieval.schemas import SearchIn
from memvault.traces.schemas import TraceCompleteIn, TraceIn, TraceStepIn
from tests.conftest import Tenant


def signed_in(t: Tenant, user: str, *extra: str) -> Principal:
    return Principal(tenant_id=t.id, scopes=frozenset({"read", "write", *extra}), subject=f"user:{user}", user_id=user)


class TestBinding:
    async def test_scope_user_without_a_user_id(self, api: NamespaceAPI, tenant_a: Tenant) -> None:
        ns = tenant_a.namespace
        mine = await api.store(
            signed_in(tenant_a, "ana"), ns, MemoryIn(content="Ana runs on Sundays", scope=ScopeLevel.user)
        )
        assert (mine.scope, mine.user_id) == (ScopeLevel.user, "ana")
        # A key bound to no user must still name one, as before.
        with pytest.raises(InvalidInput, match="needs a user_id"):
            await api.store(tenant_a.principal, ns, MemoryIn(content="Someone runs", scope=ScopeLevel.user))

    async def test_a_patch_cannot_move_a_memory_to_another_user(self, api: NamespaceAPI, tenant_a: Tenant) -> None:
        ana = signed_in(tenant_a, "ana")
        m = await api.store(ana, tenant_a.namespace, MemoryIn(content="Ana swims"))
        with pytest.raises(UserMismatch):
            await api.update_memory(ana, tenant_a.namespace, m.id, MemoryPatch(user_id="bob"))
        # A patch without a user_id keeps the owner: it is never filled in.
        out = await api.update_memory(ana, tenant_a.namespace, m.id, MemoryPatch(importance=0.9))
        assert out.user_id == "ana"

    async def test_acting_for_others_needs_its_scope(self, api: NamespaceAPI, tenant_a: Tenant) -> None:
        ns = tenant_a.namespace
        await api.store(tenant_a.principal, ns, MemoryIn(content="Bob cycles", user_id="bob"))
        with pytest.raises(UserMismatch):
            await api.list_memories(signed_in(tenant_a, "ana"), ns, MemoryFilters(user_id="bob"))
        page = await api.list_memories(signed_in(tenant_a, "ana", ACT_AS), ns, MemoryFilters(user_id="bob"))
        assert [m.content for m in page.data] == ["Bob cycles"]
        # Keyword arguments named user_id are bound too (sessions, traces).
        with pytest.raises(UserMismatch):
            await api.list_sessions(signed_in(tenant_a, "ana"), ns, user_id="bob")

    async def test_reads_without_filters_are_the_signed_in_users(self, api: NamespaceAPI, tenant_a: Tenant) -> None:
        """A read that sends no filters at all (filters=None) still reads as the signed-in user:
        the dashboard's first explorer found search and listing returning every user's memories."""
        ns = tenant_a.namespace
        await api.store(tenant_a.principal, ns, MemoryIn(content="Bob keeps bees on the roof", user_id="bob"))
        await api.store(tenant_a.principal, ns, MemoryIn(content="Ana keeps bees in the garden", user_id="ana"))
        ana = signed_in(tenant_a, "ana")
        hits = await api.search(ana, ns, SearchIn(query="who keeps bees"))
        assert [h.memory.content for h in hits.results] == ["Ana keeps bees in the garden"]
        page = await api.list_memories(ana, ns)
        assert [m.content for m in page.data] == ["Ana keeps bees in the garden"]
        context = await api.get_context(ana, ns, ContextIn(query="who keeps bees"))
        assert "Bob" not in str(context.model_dump())

    async def test_an_entity_shows_only_the_readers_memories(self, api: NamespaceAPI, tenant_a: Tenant) -> None:
        ns = tenant_a.namespace
        ana, bob = signed_in(tenant_a, "ana"), signed_in(tenant_a, "bob")
        clinic = await api.create_entity(ana, ns, EntityIn(name="North Clinic"))
        await api.store(ana, ns, MemoryIn(content="Ana sees Dr Lee at North Clinic", entity_ids=[clinic.id]))
        shared = MemoryIn(content="North Clinic opens at 8", entity_ids=[clinic.id], scope=ScopeLevel.namespace)
        await api.store(ana, ns, shared)
        seen = {m.content for m in (await api.get_entity(bob, ns, clinic.id)).memories}
        assert seen == {"North Clinic opens at 8"}
        assert len((await api.get_entity(ana, ns, clinic.id)).memories) == 2

    async def test_another_users_trace_is_not_there(self, api: NamespaceAPI, tenant_a: Tenant) -> None:
        ns = tenant_a.namespace
        ana, bob = signed_in(tenant_a, "ana"), signed_in(tenant_a, "bob")
        trace = await api.start_trace(ana, ns, TraceIn(task="Book Ana's clinic visit"))
        assert trace.user_id == "ana"
        for attempt in (
            api.get_trace(bob, ns, trace.id),
            api.add_trace_step(bob, ns, trace.id, TraceStepIn(thought="peek")),
            api.complete_trace(bob, ns, trace.id, TraceCompleteIn(outcome="done", success=True)),
            api.delete_trace(bob, ns, trace.id),
        ):
            with pytest.raises(NotFound):
                await attempt
        assert (await api.get_trace(ana, ns, trace.id)).task == "Book Ana's clinic visit"


class TestConversationsOfOthers:
    """A signed-in user's conversation (its messages, traces and session notes) is not there for
    another signed-in member, through the kinds of a search or the session's observation."""

    async def test_messages_and_observations_stay_the_users(self, api: NamespaceAPI, tenant_a: Tenant) -> None:
        ns = tenant_a.namespace
        ana, bob = signed_in(tenant_a, "ana"), signed_in(tenant_a, "bob")
        await api.ingest_events(
            ana,
            ns,
            EventsIn(session_id="s-ana", messages=[MessageIn(role=Role.user, content="My blood type is O negative")]),
        )
        await api.start_trace(ana, ns, TraceIn(task="Check the blood type for the clinic"))

        def search() -> SearchIn:
            # One request each: binding fills the request's filters with its caller's user.
            return SearchIn(query="blood type", kinds=[Kind.messages, Kind.traces])

        mine = await api.search(ana, ns, search())
        theirs = await api.search(bob, ns, search())
        # An API key serving many users still reads every conversation, as before.
        backend = await api.search(tenant_a.principal, ns, search())

        assert [m.content for m in mine.messages or []] == ["My blood type is O negative"]
        assert [t.task for t in mine.traces or []] == ["Check the blood type for the clinic"]
        assert theirs.messages == [] and theirs.traces == []
        assert [m.session_id for m in backend.messages or []] == ["s-ana"]
        with pytest.raises(SessionNotFound):
            await api.get_observations(bob, ns, "s-ana")
        # Ana's own session is there; its notes are not written until extraction runs.
        with pytest.raises(ObservationNotFound):
            await api.get_observations(ana, ns, "s-ana")


class TestContradictionsOfOthers:
    async def test_a_member_cannot_mark_see_or_resolve_with_anothers_memory(
        self, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        ns = tenant_a.namespace
        ana, bob = signed_in(tenant_a, "ana"), signed_in(tenant_a, "bob")
        private = await api.store(ana, ns, MemoryIn(content="Ana is allergic to penicillin"))
        shared = await api.store(ana, ns, MemoryIn(content="Ana takes penicillin", scope=ScopeLevel.namespace))
        bobs = await api.store(bob, ns, MemoryIn(content="Bob thinks Ana takes nothing"))

        with pytest.raises(NotFound):
            await api.mark_contradiction(bob, ns, ContradictionIn(memory_id=bobs.id, other_id=private.id))
        marked = await api.mark_contradiction(ana, ns, ContradictionIn(memory_id=private.id, other_id=shared.id))

        assert [c.id for c in (await api.list_contradictions(ana, ns)).data] == [marked.id]
        assert (await api.list_contradictions(bob, ns)).data == []
        with pytest.raises(NotFound):
            await api.resolve_contradiction(
                bob, ns, PairResolutionIn(contradiction_id=marked.id, resolution=Resolution.keep_both)
            )
