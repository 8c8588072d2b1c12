from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Response

from memvault.gateway.deps import Api, ReadPrincipal, WritePrincipal
from memvault.gateway.idempotency import IDEMPOTENT
from memvault.namespaces.router import NamespaceName
from memvault.traces.schemas import (
    TraceCompleteIn,
    TraceDetail,
    TraceIn,
    TraceOut,
    TracePage,
    TraceSearchIn,
    TraceSearchOut,
    TraceStatus,
    TraceStepIn,
    TraceStepOut,
)

router = APIRouter(prefix="/v1/namespaces/{ns}", tags=["traces"])


@router.post("/traces", status_code=201, dependencies=[IDEMPOTENT])
async def start_trace(ns: NamespaceName, body: TraceIn, p: WritePrincipal, api: Api) -> TraceOut:
    """Start a reasoning trace for a task. Record its steps with `POST /traces/{id}/steps`, then
    close it with `POST /traces/{id}/complete`."""
    return await api.start_trace(p, ns, body)


@router.post("/traces/search")
async def search_traces(ns: NamespaceName, body: TraceSearchIn, p: ReadPrincipal, api: Api) -> TraceSearchOut:
    """Find past traces for a similar task, by meaning and by words, each with its steps to replay.
    Ask for `success: true` to get only procedures that worked."""
    return await api.search_traces(p, ns, body)


@router.get("/traces")
async def list_traces(
    ns: NamespaceName,
    p: ReadPrincipal,
    api: Api,
    status: TraceStatus | None = None,
    success: bool | None = None,
    user_id: Annotated[str | None, Query(max_length=200)] = None,
    agent_id: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
) -> TracePage:
    """Traces newest first, without their steps; follow `next_cursor` for more."""
    return await api.list_traces(
        p, ns, status=status, success=success, user_id=user_id, agent_id=agent_id, limit=limit, cursor=cursor
    )


@router.get("/traces/{trace_id}")
async def get_trace(ns: NamespaceName, trace_id: uuid.UUID, p: ReadPrincipal, api: Api) -> TraceDetail:
    """One trace with every step in order."""
    return await api.get_trace(p, ns, trace_id)


@router.post("/traces/{trace_id}/steps", status_code=201, dependencies=[IDEMPOTENT])
async def add_trace_step(
    ns: NamespaceName, trace_id: uuid.UUID, body: TraceStepIn, p: WritePrincipal, api: Api
) -> TraceStepOut:
    """Record the next step of an open trace (thought, action, observation and/or a tool call).
    The server numbers steps in arrival order; a completed trace answers 409 `trace_completed`."""
    return await api.add_trace_step(p, ns, trace_id, body)


@router.post("/traces/{trace_id}/complete", dependencies=[IDEMPOTENT])
async def complete_trace(
    ns: NamespaceName, trace_id: uuid.UUID, body: TraceCompleteIn, p: WritePrincipal, api: Api
) -> TraceOut:
    """Complete a trace with its outcome and whether it succeeded. Completing twice answers 409
    `trace_completed`."""
    return await api.complete_trace(p, ns, trace_id, body)


@router.delete("/traces/{trace_id}", status_code=204, dependencies=[IDEMPOTENT])
async def delete_trace(ns: NamespaceName, trace_id: uuid.UUID, p: WritePrincipal, api: Api) -> Response:
    """Delete a trace and all its steps, permanently."""
    await api.delete_trace(p, ns, trace_id)
    return Response(status_code=204)
