"""MCP resources: what a client can read by URI (memory://...), each as the caller's credential."""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from memvault.mcp.runtime import Runtime, current_principal
from memvault.retrieval.context import ContextIn


def register(server: MCPServer, rt: Runtime) -> None:
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
