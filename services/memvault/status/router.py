from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from memvault.api import Health
from memvault.errors import NotReady, Overloaded, Unavailable
from memvault.gateway.deps import Api, current_principal, optional_auth
from memvault.status.schemas import HistoryOut
from memvault.status.service import overall
from memvault.web.render import page

log = logging.getLogger(__name__)

router = APIRouter(tags=["status"])


class NotLive(Unavailable):
    code = "not_live"
    title = "Not live"


def _redis_state(health: Health) -> dict[str, bool | None]:
    """Redis as both health routes report it: configured or not, answering (None: not configured)."""
    return {"configured": health.redis is not None, "ok": health.redis}


@router.get("/healthz", include_in_schema=False)
async def healthz(request: Request) -> dict[str, str]:
    """Liveness: the process answers and can still recover. Readiness is /readyz; dependencies are
    in /v1/status. A database that is down is not a liveness failure (it comes back, or readiness
    keeps traffic away), unless the embedded one could not be restarted: then only restarting the
    process helps, and 503 ``not_live`` asks the orchestrator to do it."""
    supervisor = getattr(request.app.state, "supervisor", None)
    if supervisor is not None and supervisor.gave_up:
        raise NotLive(
            "The embedded PostgreSQL died and could not be restarted; restart this process.",
            extra={"database": {"ok": False, "restart_attempts": supervisor.failures}},
        )
    return {"status": "ok"}


@router.get("/readyz", include_in_schema=False)
async def readyz(request: Request, api: Api) -> dict[str, Any]:
    """Readiness: 200 while the database answers, else 503 (problem JSON, code ``not_ready``), so
    that a load balancer or orchestrator stops sending traffic to a replica that cannot serve it.
    Redis is reported, not required: searches and writes go on without it (jobs wait or run in
    the process), and a Redis outage must not take every replica out of rotation at once. A
    process serving as many requests as it admits (MEMVAULT_MAX_IN_FLIGHT) is not ready either,
    until one finishes: 503 ``overloaded``, so that the balancer sends the next one elsewhere."""
    admission = getattr(request.app.state, "admission", None)
    if admission is not None and admission.saturated:
        raise Overloaded(
            f"This process serves {admission.in_flight} requests, its limit; it takes more as they finish.",
            extra={"in_flight": admission.in_flight, "limit": admission.limit},
        )
    health = await api.health()
    redis = _redis_state(health)
    if not health.database:
        raise NotReady("The database does not answer.", extra={"database": {"ok": False}, "redis": redis})
    return {"status": "ready", "database": {"ok": True}, "redis": redis}


@router.get("/v1/status")
@optional_auth
async def status(request: Request, api: Api) -> dict[str, Any]:
    """Version and the state of the database, Redis and the embedding model; ``components``: each
    part of the service (API, PostgreSQL, Redis or in-process jobs, background workers with the
    queue depth, the embedding model) with its state, and ``state`` the overall one (operational,
    degraded, down). With an API key, also the caller's tenant, scopes and namespaces."""
    health = await api.health()
    components = await api.status_components(health)
    ok = health.database and health.redis is not False
    body: dict[str, Any] = {
        "status": "ok" if ok else "degraded",
        "version": health.version,
        "database": {"ok": health.database, "embedded": health.embedded_database},
        "redis": _redis_state(health),
        "embedding_model": health.embedding_model,
        "jobs": "redis" if health.redis is not None else "in-process",
        "state": overall(components),
        "components": [c.model_dump(exclude_none=True) for c in components],
    }
    if request.headers.get("authorization"):
        principal = await current_principal(request, api)
        body["principal"] = await api.tenant_summary(principal)
    return body


@router.get("/v1/status/history")
async def status_history(api: Api) -> HistoryOut:
    """The last 90 days of the scheduler's health samples (one a minute), a day per entry with the
    minutes sampled, degraded and down, and the periods that were not operational (newest 50)."""
    return await api.status_history()


@router.get("/status", include_in_schema=False, response_class=HTMLResponse)
async def status_page(api: Api) -> HTMLResponse:
    """The public status page: what /v1/status, /v1/status/history and the latency figures say,
    for a person. Nothing about any tenant."""
    health = await api.health()
    components = await api.status_components(health)
    try:
        history = await api.status_history()
        latency = await api.status_latency()
    except Exception:  # the database away: the page still shows the components, which say so
        log.warning("could not read the status history", exc_info=True)
        history, latency = None, []
    state = overall(components)
    return page(
        "status.html",
        {
            "state": state,
            "components": components,
            "history": history,
            "latency": {(x.window, x.door, x.kind): x for x in latency},
            "version": health.version,
        },
    )
