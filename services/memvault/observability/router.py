"""GET /metrics: the Prometheus scrape, for the operator's monitoring only."""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging

from fastapi import APIRouter, Request, Response

from memvault import operator
from memvault.errors import Forbidden, Unauthenticated
from memvault.observability import metrics

log = logging.getLogger(__name__)
router = APIRouter(tags=["status"])

# The queue depth is read from PostgreSQL per scrape; a database that hangs must not hang it.
QUEUE_DEPTH_TIMEOUT_S = 2.0


class MetricsForbidden(Forbidden):
    code = "metrics_forbidden"
    title = "Metrics are not public"


def _loopback(host: str | None) -> bool:
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


def _check_access(request: Request) -> None:
    """With MEMVAULT_METRICS_TOKEN, the scrape sends it as a bearer token; without, only a client
    on this machine may scrape (a Prometheus agent or sidecar beside the server). Requests through
    a local reverse proxy count as their real client (uvicorn's proxy headers), so a proxy that
    publishes the API does not publish its metrics."""
    token = request.app.state.settings.metrics_token
    if token is None:
        if not _loopback(request.client.host if request.client else None):
            raise MetricsForbidden("Set MEMVAULT_METRICS_TOKEN to scrape from another machine.")
        return
    scheme, _, sent = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(sent.strip().encode(), token.get_secret_value().encode()):
        raise Unauthenticated("Send 'Authorization: Bearer <MEMVAULT_METRICS_TOKEN>'.")


async def _queue_depth(request: Request) -> dict[str, int]:
    db = getattr(request.app.state, "database", None)
    if db is None:
        return {}
    try:
        async with asyncio.timeout(QUEUE_DEPTH_TIMEOUT_S):
            # Every tenant's jobs, counted by kind: an operator's figure, read as the owner.
            return await operator.queued_jobs_by_kind(db)
    except Exception:  # the scrape still reports everything else; the gauge is simply absent
        log.warning("could not read the job queue depth for /metrics", exc_info=True)
        return {}


@router.get("/metrics", include_in_schema=False)
async def scrape(request: Request) -> Response:
    """Prometheus text format: every server process's samples (see observability/metrics.py)."""
    _check_access(request)
    body, content_type = metrics.render(await _queue_depth(request))
    return Response(body, media_type=content_type)
