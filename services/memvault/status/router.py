from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from memvault.gateway.deps import Api, current_principal

router = APIRouter(tags=["status"])


@router.get("/healthz", include_in_schema=False)
async def healthz() -> dict[str, str]:
    """Liveness: the process answers. Readiness and dependencies are in /v1/status."""
    return {"status": "ok"}


@router.get("/v1/status")
async def status(request: Request, api: Api) -> dict[str, Any]:
    """Version and the state of the database, Redis and the embedding model. With an API key,
    also the caller's tenant, scopes and namespaces."""
    health = await api.health()
    ok = health.database and health.redis is not False
    body: dict[str, Any] = {
        "status": "ok" if ok else "degraded",
        "version": health.version,
        "database": {"ok": health.database, "embedded": health.embedded_database},
        "redis": {"configured": health.redis is not None, "ok": health.redis},
        "embedding_model": health.embedding_model,
        "jobs": "redis" if health.redis is not None else "in-process",
    }
    if request.headers.get("authorization"):
        principal = await current_principal(request, api)
        body["principal"] = await api.tenant_summary(principal)
    return body
