"""MCP resources: what a client can read by URI (memory://...), each as the caller's credential and
through the facade, so the rules of the tools (scopes, namespaces, whose memories) hold here too."""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from memvault.mcp.runtime import Runtime, current_principal
from memvault.principal import Principal
from memvault.retrieval.context import ContextIn

T = TypeVar("T")


async def _read(rt: Runtime, fn: Callable[[], Awaitable[T]]) -> T:
    """One facade call, its failure as the protocol's error with the tools' `code: detail` text:
    a missing memory (also one of another tenant) is not-found, any other refusal invalid params,
    only our own failure an internal error."""
    try:
        return await rt.call(fn)
    except ToolError as exc:
        text = str(exc)
        code = text.split(":", 1)[0]
        if code == "internal_error":
            raise ResourceError(text) from exc
        if code.endswith("_not_found"):
            raise ResourceNotFoundError(text) from exc
        raise MCPError(code=INVALID_PARAMS, message=text) from exc


def register(server: MCPServer, rt: Runtime) -> None:
    def caller() -> Principal:
        # Static resources get no Context, so the credential comes from the request being served.
        return rt.fixed_principal or current_principal()

    async def as_json(read: Callable[[Principal], Awaitable[Any]]) -> str:
        p = caller()
        return json.dumps(await _read(rt, lambda: read(p)), ensure_ascii=False)

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
        description=(
            "Per namespace this credential reaches: current memories by type and state, entities, relations, "
            "and the namespace's own share of the store (rows kept with versions, vectors, bytes)."
        ),
    )
    async def stats() -> str:
        return await as_json(lambda p: rt.api().memory_stats(p))

    @server.resource(
        "memory://graph/stats",
        name="graph-stats",
        mime_type="application/json",
        description="Per namespace this credential reaches: entities and relations, counted by type.",
    )
    async def graph_stats() -> str:
        return await as_json(lambda p: rt.api().graph_stats(p))

    @server.resource(
        "memory://entities",
        name="entities",
        mime_type="application/json",
        description="The entities (people, places, projects, ...) this credential reaches, newest first, at most 200.",
    )
    async def entities() -> str:
        return await as_json(lambda p: rt.api().overview_entities(p))

    @server.resource(
        "memory://preferences",
        name="preferences",
        mime_type="application/json",
        description="The current preference memories this credential reads, newest first, at most 200.",
    )
    async def preferences() -> str:
        return await as_json(lambda p: rt.api().overview_preferences(p))

    @server.resource(
        "memory://memories/{memory_id}",
        name="memory",
        mime_type="application/json",
        description="One memory by id, in whichever namespace this credential reaches holds it.",
    )
    async def memory(memory_id: str, ctx: Context) -> str:
        p = rt.principal(ctx)
        m = await _read(rt, lambda: rt.api().find_memory(p, _uuid(memory_id), default_namespace=rt.namespace(p, None)))
        return str(m.model_dump_json())

    @server.resource(
        "memory://context/{session_id}",
        name="session-context",
        mime_type="text/markdown",
        description="What is remembered for a session, as a prompt-ready markdown block.",
    )
    async def session_context(session_id: str, ctx: Context) -> str:
        p = rt.principal(ctx)
        out = await _read(rt, lambda: rt.api().get_context(p, rt.namespace(p, None), ContextIn(session_id=session_id)))
        return str(out.context)


def _uuid(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError as exc:
        raise ValueError(f"not a memory id: {value!r}") from exc
