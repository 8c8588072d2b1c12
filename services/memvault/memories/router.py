from __future__ import annotations

import json
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import ValidationError

from memvault.errors import InvalidInput
from memvault.fields import Instant
from memvault.gateway.deps import Api, ReadPrincipal, WritePrincipal
from memvault.gateway.idempotency import IDEMPOTENT
from memvault.memories.schemas import (
    MemoryBatchIn,
    MemoryBatchOut,
    MemoryFilters,
    MemoryHistory,
    MemoryIn,
    MemoryOut,
    MemoryPage,
    MemoryPatch,
    MemoryState,
    MemoryType,
    ScopeLevel,
)
from memvault.namespaces.router import NamespaceName
from memvault.retrieval.context import ContextIn, ContextOut
from memvault.retrieval.schemas import SearchIn, SearchOut

router = APIRouter(prefix="/v1/namespaces/{ns}", tags=["memories"])


@router.post("/memories", status_code=201, dependencies=[IDEMPOTENT])
async def create_memory(ns: NamespaceName, body: MemoryIn, p: WritePrincipal, api: Api) -> MemoryOut:
    """Store one memory."""
    return await api.store(p, ns, body)


@router.post("/memories/batch", status_code=201, dependencies=[IDEMPOTENT])
async def create_memories(ns: NamespaceName, body: MemoryBatchIn, p: WritePrincipal, api: Api) -> MemoryBatchOut:
    """Store up to 1,000 memories in one embedding batch and one transaction: all or nothing."""
    return MemoryBatchOut(memories=await api.store_many(p, ns, body.memories))


def _metadata_filter(raw: str | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise InvalidInput("metadata must be a JSON object", extra={"field": "metadata"}) from exc
    if not isinstance(value, dict):
        raise InvalidInput("metadata must be a JSON object", extra={"field": "metadata"})
    return value


@router.get("/memories")
async def list_memories(
    ns: NamespaceName,
    p: ReadPrincipal,
    api: Api,
    type: Annotated[list[MemoryType] | None, Query(description="Repeat to match any of several.")] = None,
    user_id: Annotated[str | None, Query(max_length=200)] = None,
    agent_id: Annotated[str | None, Query(max_length=200)] = None,
    session_id: Annotated[str | None, Query(max_length=200)] = None,
    state: Annotated[list[MemoryState] | None, Query(description="Default: tentative and stable.")] = None,
    scope: Annotated[list[ScopeLevel] | None, Query(description="Scope levels to include; default all.")] = None,
    knowledge_at: Annotated[Instant | None, Query(description="What we knew at this time.")] = None,
    valid_at: Annotated[Instant | None, Query(description="What was true in the world at this time.")] = None,
    since: Annotated[
        Instant | None, Query(description="Memories dated at or after this time (`valid_from`, else stored).")
    ] = None,
    until: Annotated[Instant | None, Query(description="Memories dated before this time.")] = None,
    include_archived: bool = False,
    metadata: Annotated[
        str | None, Query(description='JSON object; memories whose metadata contains it, e.g. {"project":"x"}.')
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
) -> MemoryPage:
    """List memories newest first; follow `next_cursor` for more. With `user_id` and/or `session_id`
    the list walks the scope chain: that session's and user's memories, the namespace's, the
    tenant's and the system's, where a narrower memory hides a wider one with the same type and key.
    Default: current knowledge (`knowledge_at` to look back), archived left out."""
    try:
        filters = MemoryFilters(
            type=type,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            state=state,
            metadata=_metadata_filter(metadata),
            scopes=scope,
            knowledge_at=knowledge_at,
            valid_at=valid_at,
            since=since,
            until=until,
            include_archived=include_archived,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        raise InvalidInput(f"{field}: {first['msg']}", extra={"field": field}) from exc
    return await api.list_memories(p, ns, filters, limit=limit, cursor=cursor)


@router.get("/memories/{memory_id}")
async def get_memory(ns: NamespaceName, memory_id: uuid.UUID, p: ReadPrincipal, api: Api) -> MemoryOut:
    return await api.get_memory(p, ns, memory_id)


@router.get("/memories/{memory_id}/history")
async def memory_history(ns: NamespaceName, memory_id: uuid.UUID, p: ReadPrincipal, api: Api) -> MemoryHistory:
    """Every version of this memory (superseded ones included) and every change, with who and when."""
    return await api.memory_history(p, ns, memory_id)


@router.post("/memories/{memory_id}/promote", dependencies=[IDEMPOTENT])
async def promote_memory(ns: NamespaceName, memory_id: uuid.UUID, p: WritePrincipal, api: Api) -> MemoryOut:
    """Make a tentative (or archived) memory stable."""
    return await api.promote_memory(p, ns, memory_id)


@router.post("/memories/{memory_id}/archive", dependencies=[IDEMPOTENT])
async def archive_memory(ns: NamespaceName, memory_id: uuid.UUID, p: WritePrincipal, api: Api) -> MemoryOut:
    """Archive a memory: kept, but out of search and lists unless `include_archived`."""
    return await api.archive_memory(p, ns, memory_id)


@router.patch("/memories/{memory_id}", dependencies=[IDEMPOTENT])
async def update_memory(
    ns: NamespaceName, memory_id: uuid.UUID, body: MemoryPatch, p: WritePrincipal, api: Api
) -> MemoryOut:
    """Change some fields of a memory; changed content is re-embedded."""
    return await api.update_memory(p, ns, memory_id, body)


@router.delete("/memories/{memory_id}", status_code=204, dependencies=[IDEMPOTENT])
async def delete_memory(ns: NamespaceName, memory_id: uuid.UUID, p: WritePrincipal, api: Api) -> Response:
    """Delete a memory permanently: every version, its history and its entity links."""
    await api.delete_memory(p, ns, memory_id)
    return Response(status_code=204)


@router.post("/search")
async def search(ns: NamespaceName, body: SearchIn, p: ReadPrincipal, api: Api) -> SearchOut:
    """Find memories by meaning and by words. Each result carries its fused `score`, its
    `semantic_relevance` (cosine) and which channels found it."""
    return await api.search(p, ns, body)


@router.post("/context")
async def context(ns: NamespaceName, body: ContextIn, p: ReadPrincipal, api: Api) -> ContextOut:
    """A prompt-ready markdown block of what is remembered for a `query` and/or a `session_id` or
    `user_id`: grouped by type, dated, with provenance, packed by rank into `token_budget`
    (default 1,500). The top memory is never dropped: it is shortened instead (`truncated`)."""
    return await api.get_context(p, ns, body)
