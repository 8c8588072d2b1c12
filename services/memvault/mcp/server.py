"""The MCP server: every capability's tools.py registered on one MCPServer, plus status tools,
resources, prompts and the instructions a client receives at initialisation."""

from __future__ import annotations

from typing import Any, Literal

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

from memvault import __version__
from memvault.contradictions import tools as contradiction_tools
from memvault.entities import tools as entity_tools
from memvault.events import tools as event_tools
from memvault.facts import tools as fact_tools
from memvault.mcp import prompts, resources
from memvault.mcp.runtime import Runtime
from memvault.mcp.tool import ToolCall, Tools
from memvault.memories import tools as memory_tools
from memvault.memories.tools import READ
from memvault.traces import tools as trace_tools

Profile = Literal["core", "extended"]

# Each capability's tools.py has register(server, rt, *, extended); a new capability adds its module here.
TOOL_MODULES = (memory_tools, event_tools, entity_tools, trace_tools, fact_tools, contradiction_tools)

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
    for module in TOOL_MODULES:
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

    resources.register(server, rt)
    prompts.register(server)
    return server
