"""MCP tools for memories: the same facade calls as the REST routes, described for the model
that reads them."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from memvault.forget.schemas import ForgetIn, ForgetOut
from memvault.maintenance.schemas import DEFAULT_STEPS, MAX_BUDGET_MS, OrganizeIn, OrganizeOut, Step
from memvault.mcp import results
from memvault.mcp.results import Hits, Written
from memvault.mcp.runtime import Runtime
from memvault.mcp.tool import ToolCall, Tools
from memvault.memories.schemas import (
    MemoryFilters,
    MemoryHistory,
    MemoryIn,
    MemoryOut,
    MemoryPatch,
    MemoryState,
    MemoryType,
    ScopeLevel,
)
from memvault.retrieval.context import ContextIn, ContextOut
from memvault.retrieval.kinds import Kind, KindName
from memvault.retrieval.schemas import SearchIn

Namespace = Annotated[str | None, Field(description="Default: the credential's default namespace.")]
# A signed-in person's calls are theirs whatever a model passes (acting.py): the user defaults to them.
UserId = Annotated[str | None, Field(description="The user it concerns; default: the signed-in one.")]
SessionId = Annotated[str | None, Field(description="The conversation it concerns.")]
MemoryId = Annotated[uuid.UUID, Field(description="A memory id, as returned by memory_store or memory_search.")]
Since = Annotated[
    datetime | None,
    Field(description="Only memories dated at or after this (their valid_from, else when stored)."),
]
Until = Annotated[datetime | None, Field(description="Only memories dated before this.")]
Kinds = Annotated[tuple[KindName, ...], Field(description="Also messages, traces, entities.")]

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
            "Store one durable memory, as soon as the user states a preference, decides, corrects you, or says "
            "something about themselves or their work. One self-contained statement (`Ana prefers window seats`), "
            "not a transcript. Give things that change a stable `key` (`seat_preference`): storing it again "
            "replaces the old version, kept in history. Secrets (passwords, API keys, tokens) are refused."
        ),
    )
    async def memory_store(
        call: ToolCall,
        content: Annotated[str, Field(description="The statement to remember.")],
        type: MemoryType = MemoryType.fact,
        key: Annotated[str | None, Field(description="Stable name of what it is about.")] = None,
        scope: Annotated[ScopeLevel | None, Field(description="Default: from session_id/user_id.")] = None,
        user_id: UserId = None,
        agent_id: Annotated[str | None, Field(description="The agent that learned it.")] = None,
        session_id: SessionId = None,
        role: Annotated[str | None, Field(description="Who said it: user, assistant, tool, system.")] = None,
        speaker: Annotated[str | None, Field(description="Name of who said it.")] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="Extra JSON to keep.")] = None,
        importance: Annotated[float, Field(ge=0, le=1, description="0..1, how much it matters.")] = 0.5,
        valid_from: Annotated[datetime | None, Field(description="When it became true, if not now.")] = None,
        namespace: Namespace = None,
        entity: Annotated[
            str | None, Field(description="Link it to this entity: its id, or its name or alias.")
        ] = None,
    ) -> Annotated[CallToolResult, Written]:
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
            entity_names=[entity] if entity else [],
        )
        return results.written(await call.api.store(call.p, call.ns(namespace), body))

    @tool(
        name="memory_search",
        title="Search memories",
        annotations=READ,
        description=(
            "Find memories by meaning and exact words, best first (`what does Ana eat?`). user_id/session_id: "
            "read as that user/session, plus shared memories. Time words act: `now` gets a changed fact's newest "
            "version, `originally` its oldest."
        ),
    )
    async def memory_search(
        call: ToolCall,
        query: Annotated[str, Field(description="What to look for, in natural language.")],
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
        user_id: UserId = None,
        session_id: SessionId = None,
        types: Annotated[list[MemoryType] | None, Field(description="Only these types.")] = None,
        since: Since = None,
        until: Until = None,
        knowledge_at: Annotated[datetime | None, Field(description="As of: what was known at this time.")] = None,
        valid_at: Annotated[datetime | None, Field(description="What was true at this time.")] = None,
        explain: Annotated[bool, Field(description="Also say why each hit ranked (scope, owner, signals).")] = False,
        kinds: Kinds = ("memories",),
        namespace: Namespace = None,
        entity: Annotated[
            str | None, Field(description="Only memories linked to this entity (id, name or alias).")
        ] = None,
    ) -> Annotated[CallToolResult, Hits]:
        # Ranking knobs (weights, fusion, rerank, rewrite, neighbours) stay on REST and in the
        # namespace's settings: a model does not tune them, and each costs tokens on every turn.
        req = SearchIn(
            query=query,
            kinds=[Kind(k) for k in kinds],
            limit=limit,
            entity=entity,
            filters=MemoryFilters(
                user_id=user_id,
                session_id=session_id,
                type=types,
                knowledge_at=knowledge_at,
                valid_at=valid_at,
                since=since,
                until=until,
            ),
        )
        out = await call.api.search(call.p, call.ns(namespace), req)
        return results.compact(results.hits(out, explain=explain))

    @tool(
        name="memory_get_context",
        title="Recall context",
        annotations=READ,
        description=(
            "Recall what you know as a ready-to-read markdown block within a token budget, grouped by type, with "
            "dates. Call it at the start of a conversation (with user_id and/or session_id) and when a new topic "
            "comes up (with a query). With a session_id it opens with that session's notes."
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
    ) -> Annotated[CallToolResult, ContextOut]:
        req = ContextIn(
            query=query,
            user_id=user_id,
            session_id=session_id,
            token_budget=token_budget,
            kinds=[Kind(k) for k in kinds],
        )
        return results.context(await call.api.get_context(call.p, call.ns(namespace), req))

    @tool(
        name="memory_forget",
        title="Forget",
        annotations=DESTROY,
        description=(
            "Forget one memory (memory_id) or everything about a user, session or entity: archived (out of "
            "recall, recoverable) by default; `hard: true` erases every version for good (for a user/session, "
            "their conversation log too), only when the user asks you to forget."
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
        name="memory_get",
        title="Read a memory",
        annotations=READ,
        description="Read one memory by id, with its scope, state, dates and version links.",
    )
    async def memory_get(call: ToolCall, memory_id: MemoryId, namespace: Namespace = None) -> MemoryOut:
        return await call.api.get_memory(call.p, call.ns(namespace), memory_id)

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
    ) -> Annotated[CallToolResult, Written]:
        fields: dict[str, Any] = {
            k: v
            for k, v in (("content", content), ("importance", importance), ("metadata", metadata), ("type", type))
            if v is not None
        }

        patch = MemoryPatch(**fields)
        return results.written(await call.api.update_memory(call.p, call.ns(namespace), memory_id, patch))

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
    ) -> Annotated[CallToolResult, results.Page]:
        filters = MemoryFilters(
            user_id=user_id, session_id=session_id, type=types, state=states, since=since, until=until
        )
        return results.page(
            await call.api.list_memories(call.p, call.ns(namespace), filters, limit=limit, cursor=cursor)
        )

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
    async def memory_promote(
        call: ToolCall, memory_id: MemoryId, namespace: Namespace = None
    ) -> Annotated[CallToolResult, Written]:
        return results.written(await call.api.promote_memory(call.p, call.ns(namespace), memory_id))

    @tool(
        name="memory_archive",
        title="Archive a memory",
        annotations=CHANGE,
        description="Archive a memory that is stale or wrong: kept, but out of recall unless asked for.",
    )
    async def memory_archive(
        call: ToolCall, memory_id: MemoryId, namespace: Namespace = None
    ) -> Annotated[CallToolResult, Written]:
        return results.written(await call.api.archive_memory(call.p, call.ns(namespace), memory_id))

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
