"""MCP tools for preferences and facts: keyed memories without the model inventing keys."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from memvault.facts.schemas import FactIn, FactOut, PreferenceIn
from memvault.mcp import results
from memvault.mcp.results import Written
from memvault.mcp.runtime import Runtime
from memvault.mcp.tool import ToolCall, Tools
from memvault.memories.tools import WRITE, Namespace, SessionId, UserId

# Bounds checked by the schema (FactIn, PreferenceIn), so a bad value is a `validation_error` like on REST.
Confidence = Annotated[float, Field(description="0..1, how sure the source is.")]


def register(server: MCPServer, rt: Runtime, *, extended: bool) -> None:
    tool = Tools(server, rt)
    if not extended:
        return

    @tool(
        name="memory_add_preference",
        title="Remember a preference",
        annotations=WRITE,
        description=(
            "Store a preference of the user under a category (`seating`, `diet`, `editor`). A later preference "
            "in the same category replaces this one; the old one stays in history. Pass user_id for the user's own."
        ),
    )
    async def memory_add_preference(
        call: ToolCall,
        category: Annotated[str, Field(description="What it is about, e.g. `seating`.")],
        preference: Annotated[str, Field(description="The preference, e.g. `window seats on long flights`.")],
        context: Annotated[str | None, Field(description="When or why it applies.")] = None,
        confidence: Confidence = 1.0,
        user_id: UserId = None,
        session_id: SessionId = None,
        namespace: Namespace = None,
    ) -> Annotated[CallToolResult, Written]:
        body = PreferenceIn(
            category=category,
            preference=preference,
            context=context,
            confidence=confidence,
            user_id=user_id,
            session_id=session_id,
        )
        return results.written(await call.api.add_preference(call.p, call.ns(namespace), body))

    @tool(
        name="memory_add_fact",
        title="Remember a fact",
        annotations=WRITE,
        description=(
            "Store a fact as subject, predicate, object (`Ana`, `works_at`, `Acme`). A later fact with the same "
            "subject and predicate replaces it; the old one stays in history. When subject and object are known "
            "entities, the fact links them (a namespace-wide fact also adds the relation)."
        ),
    )
    async def memory_add_fact(
        call: ToolCall,
        subject: Annotated[str, Field(description="Who or what it is about.")],
        predicate: Annotated[str, Field(description="The property or relation, e.g. `works_at`.")],
        object: Annotated[str, Field(description="Its value.")],
        confidence: Confidence = 1.0,
        valid_from: Annotated[datetime | None, Field(description="When it became true.")] = None,
        valid_until: Annotated[datetime | None, Field(description="When it stopped being true.")] = None,
        user_id: UserId = None,
        session_id: SessionId = None,
        namespace: Namespace = None,
    ) -> FactOut:
        body = FactIn(
            subject=subject,
            predicate=predicate,
            object=object,
            confidence=confidence,
            valid_from=valid_from,
            valid_until=valid_until,
            user_id=user_id,
            session_id=session_id,
        )
        return await call.api.add_fact(call.p, call.ns(namespace), body)
