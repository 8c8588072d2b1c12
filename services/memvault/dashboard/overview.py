"""The overview page (/dashboard). The overview helper fills it in: plan, quotas, usage charts,
the MCP URL and per-client set-up snippets."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from memvault.dashboard.render import dash
from memvault.dashboard.session import Me
from memvault.gateway.deps import Api

router = APIRouter(include_in_schema=False)


@router.get("/dashboard")
async def overview(request: Request, api: Api, me: Me) -> Response:
    return dash(request, me, "overview.html", active="overview", title="Overview")
