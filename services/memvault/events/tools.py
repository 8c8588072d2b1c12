"""MCP tools for raw conversation: ingest messages for extraction, read sessions back."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from memvault.events.schemas import EventsIn, IngestOut, MessageIn, MessagePage, SessionPage
from memvault.mcp.runtime import Runtime
from memvault.mcp.tool import ToolCall, Tools
from memvault.memories.tools import READ, WRITE, Namespace, SessionId, UserId


def register(server: MCPServer, rt: Runtime, *, extended: bool) -> None:
    tool = Tools(server, rt)

    if not extended:
        return

    @tool(
        name="memory_ingest",
        title="Capture the conversation",
        annotations=WRITE,
        description=(
            "Hand raw conversation messages to memory: they are kept as the session's history and mined for "
            "durable memories in the background (returns the extraction job id). Call it at the end of a "
            "conversation, or every few turns, with the messages since the last call."
        ),
    )
    async def memory_ingest(
        call: ToolCall,
        messages: Annotated[
            list[MessageIn], Field(min_length=1, max_length=500, description="Messages in conversation order.")
        ],
        session_id: SessionId = None,
        user_id: UserId = None,
        namespace: Namespace = None,
    ) -> IngestOut:
        body = EventsIn(session_id=session_id, user_id=user_id, messages=messages)
        return await call.api.ingest_events(call.p, call.ns(namespace), body)

    @tool(
        name="session_list",
        title="List sessions",
        annotations=READ,
        description="Conversations stored so far, most recent activity first; filter by user_id.",
    )
    async def session_list(
        call: ToolCall,
        user_id: UserId = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
        cursor: str | None = None,
        namespace: Namespace = None,
    ) -> SessionPage:
        return await call.api.list_sessions(call.p, call.ns(namespace), user_id=user_id, limit=limit, cursor=cursor)

    @tool(
        name="session_messages",
        title="Read a conversation",
        annotations=READ,
        description="The raw messages of one session, oldest first (order=desc for the latest).",
    )
    async def session_messages(
        call: ToolCall,
        session_id: Annotated[str, Field(min_length=1, max_length=200)],
        limit: Annotated[int, Field(ge=1, le=200)] = 50,
        order: Literal["asc", "desc"] = "asc",
        cursor: str | None = None,
        namespace: Namespace = None,
    ) -> MessagePage:
        ns = call.ns(namespace)
        return await call.api.list_messages(call.p, ns, session_id, limit=limit, cursor=cursor, order=order)
