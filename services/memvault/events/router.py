from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Response

from memvault.events.schemas import EventsIn, IngestOut, MessagePage, Role, SessionOut, SessionPage
from memvault.gateway.deps import Api, ReadPrincipal, WritePrincipal
from memvault.gateway.idempotency import IDEMPOTENT
from memvault.namespaces.router import NamespaceName
from memvault.observations.schemas import ObservationOut

router = APIRouter(prefix="/v1/namespaces/{ns}", tags=["events"])

# Session ids are free text and may hold slashes, so the path segment is matched greedily;
# "/messages" is routed first, which leaves GET /sessions/{id} for everything else.
SessionIdPath = Annotated[str, Path(min_length=1, max_length=200, description="Session id (URL-encoded).")]


@router.post("/events", status_code=202, dependencies=[IDEMPOTENT])
async def ingest_events(
    ns: NamespaceName, body: EventsIn, p: WritePrincipal, api: Api, response: Response
) -> IngestOut:
    """Append up to 500 conversation messages as events and queue their extraction into memories.

    All or nothing, in one transaction. Each message takes the request's `session_id` and `user_id`
    unless it names its own. Answers 202 with the extraction job (its URL in `Location`), the new
    event ids in request order, and the sessions touched. An identical retry appends the events
    again but reuses the first extraction job (`job_created: false`)."""
    out = await api.ingest_events(p, ns, body)
    response.headers["Location"] = f"/v1/jobs/{out.job_id}"
    return out


@router.get("/sessions")
async def list_sessions(
    ns: NamespaceName,
    p: ReadPrincipal,
    api: Api,
    user_id: Annotated[str | None, Query(max_length=200, description="Only this user's sessions.")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=1000)] = None,
) -> SessionPage:
    """Sessions with the most recent activity first; follow `next_cursor` for more."""
    return await api.list_sessions(p, ns, user_id=user_id, limit=limit, cursor=cursor)


@router.get("/sessions/{session_id:path}/messages")
async def list_messages(
    ns: NamespaceName,
    session_id: SessionIdPath,
    p: ReadPrincipal,
    api: Api,
    order: Annotated[Literal["asc", "desc"], Query(description="asc: oldest first (default); desc: newest.")] = "asc",
    role: Annotated[list[Role] | None, Query(description="Only these roles; repeat to allow several.")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=1000)] = None,
) -> MessagePage:
    """A session's messages in conversation order (message time, then arrival); follow `next_cursor`."""
    return await api.list_messages(p, ns, session_id, limit=limit, cursor=cursor, order=order, role=role)


@router.get("/sessions/{session_id:path}/observations")
async def get_observations(ns: NamespaceName, session_id: SessionIdPath, p: ReadPrincipal, api: Api) -> ObservationOut:
    """What the session was about: summary, topics, decisions and open questions, written by its
    extraction (rule-based, or the configured LLM) and rewritten each time new events are extracted.
    404 `observation_not_found` until the session's first extraction job has run."""
    return await api.get_observations(p, ns, session_id)


@router.get("/sessions/{session_id:path}")
async def get_session(ns: NamespaceName, session_id: SessionIdPath, p: ReadPrincipal, api: Api) -> SessionOut:
    """One session: its user, first and last message times and message count."""
    return await api.get_session(p, ns, session_id)
