"""MCP tool for session observations: what a conversation was about, decided and left open."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from memvault.mcp.runtime import Runtime
from memvault.mcp.tool import ToolCall, Tools
from memvault.memories.tools import READ, Namespace
from memvault.observations.schemas import ObservationOut


def register(server: MCPServer, rt: Runtime, *, extended: bool) -> None:
    if not extended:
        return
    tool = Tools(server, rt)

    @tool(
        name="memory_get_observations",
        title="Session notes",
        annotations=READ,
        description=(
            "What one conversation was about: a short summary, its topics, the decisions made and the open "
            "questions left, kept up to date from the messages given to memory_ingest. Use it to pick up a "
            "session where it stopped."
        ),
    )
    async def memory_get_observations(
        call: ToolCall,
        session_id: Annotated[str, Field(min_length=1, max_length=200, description="The session.")],
        namespace: Namespace = None,
    ) -> ObservationOut:
        return await call.api.get_observations(call.p, call.ns(namespace), session_id)
