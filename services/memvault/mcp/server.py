"""The MCP server: every capability's tools.py registered on one MCPServer, plus status tools,
resources, prompts and the instructions a client receives at initialisation."""

from __future__ import annotations

import json
from typing import Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

from memvault import __version__
from memvault.entities import tools as entity_tools
from memvault.events import tools as event_tools
from memvault.mcp.runtime import Runtime, current_principal
from memvault.mcp.tool import ToolCall, Tools
from memvault.memories import tools as memory_tools
from memvault.memories.tools import READ
from memvault.retrieval.context import ContextIn
from memvault.traces import tools as trace_tools

Profile = Literal["core", "extended"]

INSTRUCTIONS = """\
memvault is your long-term memory across conversations. Use it like this:
1. At the start of a conversation, call memory_get_context with the user's user_id (and session_id) to \
recall what you already know; call it again with a query when a new topic comes up.
2. As the conversation goes, call memory_store for durable things: preferences, decisions, instructions, \
corrections, facts about the user, their people, projects and plans. One self-contained statement each; \
give a stable `key` to things that change (a new value with the same key replaces the old one, which stays \
in history).
3. When recall is not specific enough, call memory_search with a precise query.
4. At the end of a conversation (or every few turns), call memory_ingest with the messages, so the \
conversation is kept and mined for anything you missed.
5. Never store secrets: passwords, API keys, tokens, private keys or connection strings are refused.
6. When the user asks you to forget something, use memory_forget (hard: true erases it for good).
"""


class Status(BaseModel):
    version: str
    database: bool
    redis: bool | None
    embedding_model: str
    tenant_id: str
    scopes: list[str]
    namespaces: list[str]
    memories: int


def build_server(rt: Runtime, profile: Profile = "extended") -> MCPServer:
    server = MCPServer(
        name="memvault",
        title="memvault",
        description="Long-term memory for AI agents: store, recall, search and forget.",
        instructions=INSTRUCTIONS,
        version=__version__,
        website_url="https://memvault.dev",
    )
    extended = profile == "extended"
    for module in (memory_tools, event_tools, entity_tools, trace_tools):
        module.register(server, rt, extended=extended)

    tool = Tools(server, rt)

    async def status(call: ToolCall) -> Status:
        health = await call.api.health()
        summary = await call.api.tenant_summary(call.p)
        return Status(
            version=health.version,
            database=health.database,
            redis=health.redis,
            embedding_model=health.embedding_model,
            tenant_id=summary["tenant_id"],
            scopes=summary["scopes"],
            namespaces=summary["namespaces"],
            memories=summary["memories"],
        )

    if extended:
        tool(
            name="memory_status",
            title="Memory service status",
            annotations=READ,
            description="Health of the memory service and what this credential can reach.",
        )(status)

        @tool(
            name="memory_account",
            title="Account",
            annotations=READ,
            description=(
                "The account behind this credential: tenant, scopes, namespaces, how much is stored, the plan "
                "with its limits, each quota's use (used / limit / resets_at) and this month's usage by door."
            ),
        )
        async def memory_account(call: ToolCall) -> dict[str, Any]:
            return await call.api.account_overview(call.p)

    _resources(server, rt)
    _prompts(server)
    return server


def _resources(server: MCPServer, rt: Runtime) -> None:
    @server.resource("memory://health", name="health", mime_type="application/json", description="Service health.")
    async def health() -> str:
        h = await rt.api().health()
        return json.dumps(
            {"version": h.version, "database": h.database, "redis": h.redis, "embedding_model": h.embedding_model}
        )

    @server.resource(
        "memory://stats",
        name="stats",
        mime_type="application/json",
        description="This credential's namespaces and how many memories each holds.",
    )
    async def stats() -> str:
        # Static resources get no Context, so the credential comes from the request being served.
        p = rt.fixed_principal or current_principal()
        namespaces = await rt.call(lambda: rt.api().list_namespaces(p))
        return json.dumps({"namespaces": {n.name: n.memory_count for n in namespaces}})

    @server.resource(
        "memory://memories/{memory_id}",
        name="memory",
        mime_type="application/json",
        description="One memory by id, in the credential's default namespace.",
    )
    async def memory(memory_id: str, ctx: Context) -> str:
        p = rt.principal(ctx)
        m = await rt.call(lambda: rt.api().get_memory(p, rt.namespace(p, None), _uuid(memory_id)))
        return m.model_dump_json()

    @server.resource(
        "memory://context/{session_id}",
        name="session-context",
        mime_type="text/markdown",
        description="What is remembered for a session, as a prompt-ready markdown block.",
    )
    async def session_context(session_id: str, ctx: Context) -> str:
        p = rt.principal(ctx)
        out = await rt.call(lambda: rt.api().get_context(p, rt.namespace(p, None), ContextIn(session_id=session_id)))
        return out.context


def _uuid(value: str) -> Any:
    import uuid

    try:
        return uuid.UUID(value)
    except ValueError as exc:
        raise ValueError(f"not a memory id: {value!r}") from exc


def _prompts(server: MCPServer) -> None:
    @server.prompt(
        name="memory-conversation",
        title="Converse with memory",
        description="Start a conversation that recalls what is known and keeps memory up to date.",
    )
    def memory_conversation(user_id: str, topic: str = "") -> str:
        about = f" The conversation is about: {topic}." if topic else ""
        return (
            f"You are talking with user `{user_id}`.{about}\n"
            f"First call memory_get_context with user_id `{user_id}`"
            + (f" and query `{topic}`" if topic else "")
            + " and use what it returns. During the conversation, call memory_store for each new durable "
            "preference, decision, instruction or correction (with a stable key when it may change later), and "
            "memory_search when you need something specific. At the end, call memory_ingest with the messages. "
            "Never store secrets."
        )

    @server.prompt(
        name="memory-review",
        title="Review stored memory",
        description="Review what is stored about a user: find contradictions, stale facts and duplicates.",
    )
    def memory_review(user_id: str = "") -> str:
        who = f" for user `{user_id}`" if user_id else ""
        return (
            f"Review the stored memories{who}. Page through them with memory_list"
            + (f" (user_id `{user_id}`)" if user_id else "")
            + ", and use memory_history where a memory has versions. List: (1) contradictions (two current "
            "memories that cannot both be true), (2) stale facts (dated, or superseded in the world), "
            "(3) duplicates, (4) tentative memories that the evidence confirms. For each, propose the fix "
            "(memory_archive, memory_update, memory_promote, or a new memory_store with the same key) and "
            "apply it only after the user agrees."
        )
