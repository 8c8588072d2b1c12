"""MCP tools for contradictions between memories: marked, shown on search hits, resolved."""

from __future__ import annotations

import uuid
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from memvault.contradictions.schemas import ContradictionIn, ContradictionOut, PairResolutionIn, Resolution
from memvault.mcp.runtime import Runtime
from memvault.mcp.tool import ToolCall, Tools
from memvault.memories.tools import CHANGE, WRITE, MemoryId, Namespace


def register(server: MCPServer, rt: Runtime, *, extended: bool) -> None:
    tool = Tools(server, rt)
    if not extended:
        return

    @tool(
        name="memory_mark_contradiction",
        title="Mark a contradiction",
        annotations=WRITE,
        description=(
            "Mark two memories as contradicting each other when you cannot tell which is right. Until resolved, "
            "search hits of either list the other in `contradicted_by`: ask the user, then resolve it."
        ),
    )
    async def memory_mark_contradiction(
        call: ToolCall,
        memory_id: MemoryId,
        other_id: MemoryId,
        note: Annotated[str | None, Field(description="What they disagree on.")] = None,
        namespace: Namespace = None,
    ) -> ContradictionOut:
        body = ContradictionIn(memory_id=memory_id, other_id=other_id, note=note)
        return await call.api.mark_contradiction(call.p, call.ns(namespace), body)

    @tool(
        name="memory_resolve_contradiction",
        title="Resolve a contradiction",
        annotations=CHANGE,
        description=(
            "Resolve a contradiction, named by contradiction_id or by its two memory ids. `keep_one`: keep "
            "`keep_id`, archive the other. `keep_both`: both hold (e.g. at different times). `note`: record why."
        ),
    )
    async def memory_resolve_contradiction(
        call: ToolCall,
        resolution: Resolution,
        contradiction_id: uuid.UUID | None = None,
        memory_id: uuid.UUID | None = None,
        other_id: uuid.UUID | None = None,
        keep_id: Annotated[uuid.UUID | None, Field(description="With keep_one: the memory that stays.")] = None,
        note: str | None = None,
        namespace: Namespace = None,
    ) -> ContradictionOut:
        body = PairResolutionIn(
            contradiction_id=contradiction_id,
            memory_id=memory_id,
            other_id=other_id,
            resolution=resolution,
            keep_id=keep_id,
            note=note,
        )
        return await call.api.resolve_contradiction(call.p, call.ns(namespace), body)
