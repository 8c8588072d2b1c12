"""The MCP server: every capability's tools.py registered on one MCPServer, plus status tools,
resources, prompts and the instructions a client receives at initialisation."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

from memvault import __version__
from memvault.contradictions import tools as contradiction_tools
from memvault.entities import tools as entity_tools
from memvault.events import tools as event_tools
from memvault.facts import tools as fact_tools
from memvault.graph import tools as graph_tools
from memvault.jobs import tools as job_tools
from memvault.mcp import prompts, resources, setup, setup_tools
from memvault.mcp.runtime import Runtime
from memvault.mcp.schema import lean_tools
from memvault.mcp.tool import ToolCall, Tools
from memvault.memories import tools as memory_tools
from memvault.memories.tools import READ
from memvault.observations import tools as observation_tools
from memvault.traces import tools as trace_tools

Profile = Literal["core", "extended"]

# Each capability's tools.py has register(server, rt, *, extended); a new capability adds its module here.
TOOL_MODULES = (
    memory_tools,
    event_tools,
    entity_tools,
    trace_tools,
    graph_tools,
    fact_tools,
    contradiction_tools,
    observation_tools,
    job_tools,
    setup_tools,
)

INSTRUCTIONS = """\
memvault is your long-term memory across conversations. Use it like this:
1. At the start of a conversation, call memory_get_context with the user's user_id (and session_id) to \
recall what you already know; call it again with a query when a new topic comes up.
2. As the conversation goes, call memory_store for durable things: preferences, decisions, instructions, \
corrections, facts about the user, their people, projects and plans. One self-contained statement each; \
give a stable `key` to things that change (a new value with the same key replaces the old one, which stays \
in history).
3. When recall is not specific enough, call memory_search with a precise query.
4. Where memory_ingest is offered (the extended profile), call it at the end of a conversation (or every \
few turns) with the messages, so the conversation is kept and mined for anything you missed.
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
    rules: dict[str, str] | None = Field(
        default=None,
        description="Per rule file of the project (`memvault mcp setup`): installed, outdated, missing or "
        "opted_out; null when the server cannot see the project (over HTTP).",
    )
    acting_as_user: str | None = Field(
        description="The signed-in user whose memories every call reads and writes; null: the user_id each "
        "call names (an API key serving many users)."
    )


@contextmanager
def _logging_untouched() -> Iterator[None]:
    """The MCP SDK configures logging as if it were the program (a rich handler on the root logger
    at INFO) when nothing has yet: in an app built by tests, benchmarks or an ASGI host other than
    `memvault serve`, every access log line was then rendered by rich, several milliseconds of CPU
    a request. How logs go out is memvault's choice (observability/logs.py) or its host's."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def build_server(rt: Runtime, profile: Profile = "extended") -> MCPServer:
    with _logging_untouched():
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
            rules=dict(setup.state(rt.project_dir)) if rt.project_dir is not None else None,
            acting_as_user=summary["acting_as_user"],
        )

    tool(
        name="memory_status",
        title="Memory service status",
        annotations=READ,
        description="Health of the memory service and what this credential can reach.",
    )(status)

    if extended:

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
    prompts.register(server, extended=extended)
    lean_tools(server)
    return server
