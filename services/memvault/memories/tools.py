"""MCP tools for memories: the same facade calls as the REST routes, described for the model
that reads them."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from memvault.forget.schemas import ForgetIn, ForgetOut
from memvault.maintenance.schemas import DEFAULT_STEPS, MAX_BUDGET_MS, OrganizeIn, OrganizeOut, Step
from memvault.mcp.runtime import Runtime
from memvault.mcp.tool import ToolCall, Tools
from memvault.memories.schemas import (
    MemoryFilters,
    MemoryHistory,
    MemoryIn,
    MemoryOut,
    MemoryPage,
    MemoryPatch,
    MemoryState,
    MemoryType,
    ScopeLevel,
)
from memvault.retrieval.context import ContextIn, ContextOut
from memvault.retrieval.kinds import Kind, KindName
from memvault.retrieval.schemas import DEFAULT_WEIGHTS, Fusion, SearchIn, SearchOut

Namespace = Annotated[
    str | None, Field(description="Namespace to use; default: the key's default namespace, else `default`.")
]
UserId = Annotated[str | None, Field(description="The user this concerns (their memories are private to them).")]
SessionId = Annotated[str | None, Field(description="The conversation/session this concerns.")]
MemoryId = Annotated[uuid.UUID, Field(description="A memory id, as returned by memory_store or memory_search.")]
Since = Annotated[
    datetime | None,
    Field(description="Only memories dated at or after this time (their valid_from, else when stored)."),
]
Until = Annotated[datetime | None, Field(description="Only memories dated before this time.")]
Kinds = Annotated[
    tuple[KindName, ...],
    Field(description="Also messages, traces, entities (own lists)."),
]

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
CHANGE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
DESTROY = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)


def register(server: MCPServer, rt: Runtime, *, extended: bool) -> None:
    tool = Tools(server, rt)

    @tool(
        name="memory_store",
        title="Remember something",
        annotations=WRITE,
        description=(
            "Store one durable memory: a preference, decision, instruction, fact, task or event worth recalling "
            "in a later conversation. Call it as soon as the user states a preference, makes a decision, corrects "
            "you, or tells you something about themselves or their work. Write one self-contained statement "
            "(`Ana prefers window seats`), not a transcript. Give a stable `key` (e.g. `seat_preference`) for "
            "things that change over time: storing the same key again replaces the old version and keeps it in "
            "history. Never store passwords, API keys or tokens: they are refused."
        ),
    )
    async def memory_store(
        call: ToolCall,
        content: Annotated[str, Field(description="The statement to remember, self-contained.")],
        type: Annotated[MemoryType, Field(description="What kind of memory it is.")] = MemoryType.fact,
        key: Annotated[str | None, Field(description="Stable name of what it is about, to supersede later.")] = None,
        scope: Annotated[
            ScopeLevel | None, Field(description="session, user or namespace (default from user_id/session_id).")
        ] = None,
        user_id: UserId = None,
        agent_id: Annotated[str | None, Field(description="The agent that learned it.")] = None,
        session_id: SessionId = None,
        role: Annotated[str | None, Field(description="Who said it: user, assistant, tool or system.")] = None,
        speaker: Annotated[str | None, Field(description="Name of the person who said it.")] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="Extra JSON fields to keep.")] = None,
        importance: Annotated[float, Field(ge=0, le=1, description="0..1, how much it matters.")] = 0.5,
        valid_from: Annotated[datetime | None, Field(description="When it became true, if not now.")] = None,
        namespace: Namespace = None,
    ) -> MemoryOut:
        meta = dict(metadata or {})
        meta.update({k: v for k, v in (("role", role), ("speaker", speaker)) if v})
        body = MemoryIn(
            content=content,
            type=type,
            key=key,
            scope=scope,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            metadata=meta,
            importance=importance,
            valid_from=valid_from,
        )
        return await call.api.store(call.p, call.ns(namespace), body)

    @tool(
        name="memory_search",
        title="Search memories",
        annotations=READ,
        description=(
            "Find stored memories by meaning and by exact words, ranked. Use it when you need something specific "
            "(`what does Ana eat?`) or when memory_get_context was not specific enough. Pass user_id/session_id "
            "to read as that user/session (their own memories plus shared ones). `knowledge_at` searches what "
            "was known at a past time; `valid_at` what was true then; `since`/`until` keep memories dated in a "
            "range. Results carry `score` and `semantic_relevance` (cosine, 0..1); `min_score` drops weakly "
            "related ones."
        ),
    )
    async def memory_search(
        call: ToolCall,
        query: Annotated[str, Field(description="What to look for, in natural language.")],
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
        user_id: UserId = None,
        session_id: SessionId = None,
        agent_id: Annotated[str | None, Field(description="Only memories of this agent.")] = None,
        types: Annotated[list[MemoryType] | None, Field(description="Only these memory types.")] = None,
        knowledge_at: Annotated[datetime | None, Field(description="Search what was known at this time.")] = None,
        valid_at: Annotated[datetime | None, Field(description="Search what was true at this time.")] = None,
        since: Since = None,
        until: Until = None,
        min_score: Annotated[float | None, Field(ge=-1, le=1)] = None,
        include_archived: bool = False,
        neighbours: Annotated[
            int,
            Field(ge=0, le=5, description="Also return this many memories before and after each hit, in its session."),
        ] = 0,
        reference_time: Annotated[
            datetime | None, Field(description='What "now" is for cues like "last week"; default: now.')
        ] = None,
        weights: Annotated[
            dict[str, float] | None,
            Field(description=f"Fusion weights (0..10) per channel over the defaults {DEFAULT_WEIGHTS}."),
        ] = None,
        fusion: Annotated[Fusion | None, Field(description="`weighted` or `rrf`; default: the namespace's.")] = None,
        rerank: Annotated[bool | None, Field(description="Rerank the top hits if configured; default: if so.")] = None,
        rewrite: Annotated[bool | None, Field(description="Rewrite the query (HyDE) if configured.")] = None,
        kinds: Kinds = ("memories",),
        namespace: Namespace = None,
    ) -> SearchOut:
        req = SearchIn(
            query=query,
            kinds=[Kind(k) for k in kinds],
            limit=limit,
            min_score=min_score,
            neighbours=neighbours,
            reference_time=reference_time,
            weights=weights,
            fusion=fusion,
            rerank=rerank,
            rewrite=rewrite,
            filters=MemoryFilters(
                user_id=user_id,
                session_id=session_id,
                agent_id=agent_id,
                type=types,
                knowledge_at=knowledge_at,
                valid_at=valid_at,
                since=since,
                until=until,
                include_archived=include_archived,
            ),
        )
        return await call.api.search(call.p, call.ns(namespace), req)

    @tool(
        name="memory_get_context",
        title="Recall context",
        annotations=READ,
        description=(
            "Recall what you know, as a ready-to-read markdown block within a token budget, grouped by type "
            "with dates. Call it at the start of a conversation (with user_id and/or session_id) and whenever a "
            "new topic comes up (with a query). With a session_id it opens with that session's notes. Cheaper and "
            "broader than several searches."
        ),
    )
    async def memory_get_context(
        call: ToolCall,
        query: Annotated[str | None, Field(description="The topic; omit to recall for the user/session.")] = None,
        user_id: UserId = None,
        session_id: SessionId = None,
        token_budget: Annotated[int, Field(ge=50, le=32000)] = 1500,
        kinds: Kinds = ("memories",),
        namespace: Namespace = None,
    ) -> ContextOut:
        req = ContextIn(
            query=query,
            user_id=user_id,
            session_id=session_id,
            token_budget=token_budget,
            kinds=[Kind(k) for k in kinds],
        )
        return await call.api.get_context(call.p, call.ns(namespace), req)

    @tool(
        name="memory_get",
        title="Read a memory",
        annotations=READ,
        description="Read one memory by id, with its scope, state, dates and version links.",
    )
    async def memory_get(call: ToolCall, memory_id: MemoryId, namespace: Namespace = None) -> MemoryOut:
        return await call.api.get_memory(call.p, call.ns(namespace), memory_id)

    @tool(
        name="memory_forget",
        title="Forget",
        annotations=DESTROY,
        description=(
            "Forget a memory (by memory_id) or everything about a user, session or entity. `hard: false` "
            "(default) archives: out of recall, but recoverable. `hard: true` erases for good, with every "
            "version and history (and, for a user/session, their conversation log). Only erase when the user "
            "asks you to forget."
        ),
    )
    async def memory_forget(
        call: ToolCall,
        memory_id: Annotated[uuid.UUID | None, Field(description="One memory to forget.")] = None,
        user_id: UserId = None,
        session_id: SessionId = None,
        entity_id: Annotated[uuid.UUID | None, Field(description="Everything linked to this entity.")] = None,
        hard: bool = False,
        namespace: Namespace = None,
    ) -> ForgetOut:
        api, ns = call.api, call.ns(namespace)
        if memory_id is not None:
            if any(v is not None for v in (user_id, session_id, entity_id)):
                raise ValueError("give memory_id alone, or one of user_id, session_id, entity_id")
            if hard:
                await api.delete_memory(call.p, ns, memory_id)
            else:
                await api.archive_memory(call.p, ns, memory_id)
            zero = dict.fromkeys(("events", "sessions", "traces", "entities", "relations"), 0)
            return ForgetOut(hard=hard, selector="memory_id", memories=1, **zero)
        body = ForgetIn(user_id=user_id, session_id=session_id, entity_id=entity_id, hard=hard)
        return await api.forget(call.p, ns, body)

    if not extended:
        return

    @tool(
        name="memory_update",
        title="Correct a memory",
        annotations=CHANGE,
        description=(
            "Correct the current version of a memory in place (a typo, importance, metadata). When something "
            "changed in the world, store a new memory with the same key instead, so the old one stays in history."
        ),
    )
    async def memory_update(
        call: ToolCall,
        memory_id: MemoryId,
        content: str | None = None,
        importance: Annotated[float | None, Field(ge=0, le=1)] = None,
        metadata: dict[str, Any] | None = None,
        type: MemoryType | None = None,
        namespace: Namespace = None,
    ) -> MemoryOut:
        fields: dict[str, Any] = {
            k: v
            for k, v in (("content", content), ("importance", importance), ("metadata", metadata), ("type", type))
            if v is not None
        }

        patch = MemoryPatch(**fields)
        return await call.api.update_memory(call.p, call.ns(namespace), memory_id, patch)

    @tool(
        name="memory_list",
        title="List memories",
        annotations=READ,
        description="List memories newest first (for browsing or review); pass `cursor` from the last page for more.",
    )
    async def memory_list(
        call: ToolCall,
        user_id: UserId = None,
        session_id: SessionId = None,
        types: list[MemoryType] | None = None,
        states: list[MemoryState] | None = None,
        since: Since = None,
        until: Until = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
        cursor: str | None = None,
        namespace: Namespace = None,
    ) -> MemoryPage:
        filters = MemoryFilters(
            user_id=user_id, session_id=session_id, type=types, state=states, since=since, until=until
        )
        return await call.api.list_memories(call.p, call.ns(namespace), filters, limit=limit, cursor=cursor)

    @tool(
        name="memory_history",
        title="Memory history",
        annotations=READ,
        description="Every version of a memory and every change to it, with who made it and when.",
    )
    async def memory_history(call: ToolCall, memory_id: MemoryId, namespace: Namespace = None) -> MemoryHistory:
        return await call.api.memory_history(call.p, call.ns(namespace), memory_id)

    @tool(
        name="memory_promote",
        title="Confirm a memory",
        annotations=CHANGE,
        description="Mark a tentative memory as confirmed (stable), e.g. after the user agreed it is right.",
    )
    async def memory_promote(call: ToolCall, memory_id: MemoryId, namespace: Namespace = None) -> MemoryOut:
        return await call.api.promote_memory(call.p, call.ns(namespace), memory_id)

    @tool(
        name="memory_archive",
        title="Archive a memory",
        annotations=CHANGE,
        description="Archive a memory that is stale or wrong: kept, but out of recall unless asked for.",
    )
    async def memory_archive(call: ToolCall, memory_id: MemoryId, namespace: Namespace = None) -> MemoryOut:
        return await call.api.archive_memory(call.p, call.ns(namespace), memory_id)

    @tool(
        name="memory_organize",
        title="Tidy up memory",
        annotations=CHANGE,
        description=(
            "Queue maintenance of the namespace: merge duplicate memories (dedup), confirm memories that keep "
            "coming up (promote), archive ones that faded (decay), and re-embed after a model change (reembed). "
            "Returns the job id; nothing is deleted. Useful after a long session or a bulk import."
        ),
    )
    async def memory_organize(
        call: ToolCall,
        jobs: Annotated[
            list[Step] | None, Field(description="Steps to run, in order; default reembed, dedup, promote, decay.")
        ] = None,
        budget_ms: Annotated[int, Field(ge=1, le=MAX_BUDGET_MS, description="Time budget for all steps.")] = 60_000,
        namespace: Namespace = None,
    ) -> OrganizeOut:
        body = OrganizeIn(jobs=jobs or list(DEFAULT_STEPS), budget_ms=budget_ms)
        return await call.api.organize(call.p, call.ns(namespace), body)
