"""The memory explorer: search a namespace as a user or a session would and see why each hit
ranked (/dashboard/explorer), then one memory with its versions, its entities and their graph,
and what a member may do to it: archive, promote, forget (/dashboard/explorer/{ns}/memories/{id}).

Every read and change is the facade's, with the member's principal: a member or viewer is bound to
their own user (principal.py bind_user), so naming another user is refused as it is at every door."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.responses import Response

from memvault.dashboard.explorer_draw import BAR_WIDTH, draw_graph, hit_bars
from memvault.dashboard.render import dash
from memvault.dashboard.session import Me, MemberForm, see_other
from memvault.errors import InvalidInput
from memvault.gateway.deps import Api
from memvault.memories.schemas import MemoryFilters, MemoryOut
from memvault.principal import UserMismatch
from memvault.retrieval.schemas import SearchIn, SearchOut

router = APIRouter(include_in_schema=False)

HITS = 20
DONE = {
    "archived": "Archived: kept, but left out of search and lists.",
    "promoted": "Promoted: the memory is now stable.",
    "forgotten": "Forgotten: the memory is archived and out of search.",
    "erased": "Erased: the memory and every version of it are deleted.",
}


def _search_request(query: str, user_id: str, session_id: str) -> SearchIn:
    # Filters always, even empty: the facade binds a signed-in member to their own user through
    # the request's filters (acting.py), and a search without them would read every user's.
    filters = MemoryFilters(user_id=user_id or None, session_id=session_id or None)
    return SearchIn(query=query, limit=HITS, filters=filters)


@router.get("/dashboard/explorer")
async def explorer(request: Request, api: Api, me: Me) -> Response:
    q = request.query_params
    asked = {name: q.get(name, "").strip() for name in ("namespace", "query", "user_id", "session_id")}
    names = await api.namespace_names(me.principal)
    found: SearchOut | None = None
    error: str | None = None
    status = 200
    if asked["namespace"] and asked["query"]:
        try:
            req = _search_request(asked["query"], asked["user_id"], asked["session_id"])
            found = await api.search(me.principal, asked["namespace"], req)
        except ValidationError as exc:
            error, status = f"The search is not valid: {exc.errors()[0]['msg']}.", 422
        except UserMismatch as exc:
            # The member's own user is the only one they may search as: said on the page, with
            # the form still there, rather than on an error page.
            error, status = exc.detail, exc.status
    return dash(
        request,
        me,
        "explorer.html",
        active="explorer",
        title="Explorer",
        names=names,
        asked=asked,
        found=found,
        bars=hit_bars(found) if found else {},
        bar_width=BAR_WIDTH,
        error=error,
        notice=DONE.get(q.get("done", "")),
        status_code=status,
    )


def _memory_path(ns: str, memory_id: uuid.UUID) -> str:
    return f"/dashboard/explorer/{ns}/memories/{memory_id}"


@router.get("/dashboard/explorer/{ns}/memories/{memory_id}")
async def memory(request: Request, ns: str, memory_id: uuid.UUID, api: Api, me: Me) -> Response:
    history = await api.memory_history(me.principal, ns, memory_id)
    this = next(v for v in history.versions if v.id == memory_id) if history.versions else None
    if this is None:
        raise InvalidInput(f"Memory {memory_id} has no versions to show.")
    # Tenant- and system-wide memories belong to no namespace's graph.
    graph = await api.memory_graph(me.principal, ns, memory_id) if this.namespace is not None else None
    return dash(
        request,
        me,
        "memory.html",
        active="explorer",
        title="Memory",
        notice=DONE.get(request.query_params.get("done", "")),
        ns=ns,
        memory=this,
        history=history,
        changes=_changes_by_version(history.changes),
        graph=graph,
        drawing=draw_graph(graph) if graph else None,
        back=_back(request.query_params.get("back")),
    )


def _back(value: str | None) -> str | None:
    """The search a hit was opened from, to go back to: only ever an explorer page of ours."""
    if value and value.startswith("/dashboard/explorer?") and "\\" not in value:
        return value
    return None


def _changes_by_version(changes: list[Any]) -> dict[uuid.UUID, list[Any]]:
    out: dict[uuid.UUID, list[Any]] = {}
    for c in changes:
        out.setdefault(c.memory_id, []).append(c)
    return out


@router.post("/dashboard/explorer/{ns}/memories/{memory_id}/archive")
async def archive(request: Request, ns: str, memory_id: uuid.UUID, api: Api, me: Me, form: MemberForm) -> Response:
    await api.archive_memory(me.principal, ns, memory_id)
    return see_other(_memory_path(ns, memory_id), done="archived")


@router.post("/dashboard/explorer/{ns}/memories/{memory_id}/promote")
async def promote(request: Request, ns: str, memory_id: uuid.UUID, api: Api, me: Me, form: MemberForm) -> Response:
    await api.promote_memory(me.principal, ns, memory_id)
    return see_other(_memory_path(ns, memory_id), done="promoted")


async def _current(api: Any, me: Me, ns: str, memory_id: uuid.UUID) -> tuple[MemoryOut, int]:
    """The version a forget acts on (the current one: an old version cannot be archived on its
    own, and erasing takes every version anyway), and how many versions there are."""
    history = await api.memory_history(me.principal, ns, memory_id)
    wanted = history.current_id or memory_id
    this = next((v for v in history.versions if v.id == wanted), None)
    if this is None:
        raise InvalidInput(f"Memory {memory_id} has no versions to show.")
    return this, len(history.versions)


@router.get("/dashboard/explorer/{ns}/memories/{memory_id}/forget")
async def forget_page(request: Request, ns: str, memory_id: uuid.UUID, api: Api, me: Me) -> Response:
    this, versions = await _current(api, me, ns, memory_id)
    return dash(
        request, me, "forget.html", active="explorer", title="Forget a memory", ns=ns, memory=this, versions=versions
    )


@router.post("/dashboard/explorer/{ns}/memories/{memory_id}/forget")
async def forget(request: Request, ns: str, memory_id: uuid.UUID, api: Api, me: Me, form: MemberForm) -> Response:
    mode = form.get("mode")
    if mode == "hard":
        await api.delete_memory(me.principal, ns, memory_id)
        return see_other("/dashboard/explorer", namespace=ns, done="erased")
    if mode == "soft":
        await api.archive_memory(me.principal, ns, memory_id)
        return see_other(_memory_path(ns, memory_id), done="forgotten")
    raise InvalidInput("Choose how to forget: archive (soft) or erase (hard).", extra={"field": "mode"})
