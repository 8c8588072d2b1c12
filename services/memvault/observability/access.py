"""What each answered request leaves behind: one access log line and the request metrics."""

from __future__ import annotations

import logging
from typing import Any

from starlette.types import Scope

from memvault.observability import metrics

log = logging.getLogger("memvault.access")

# Where the gateway and the MCP endpoint leave the caller they authenticated (gateway/deps.py,
# mcp/runtime.PRINCIPAL_STATE).
_PRINCIPAL_KEYS = ("principal", "memvault_principal")


def door(path: str) -> str:
    """Which front door a path belongs to, for metrics and logs (the SDK uses the REST door)."""
    return "mcp" if path == "/mcp" or path.startswith("/mcp/") else "rest"


def route_of(scope: Scope) -> str:
    """The template of the route that served the request (``/v1/namespaces/{ns}/memories``):
    never the raw path, so that a scan of made-up paths cannot grow the metrics' label set."""
    template = getattr(scope.get("route"), "path", None)
    if isinstance(template, str):
        return template
    return "/mcp" if door(scope["path"]) == "mcp" else metrics.UNMATCHED


def _principal(scope: Scope) -> Any:
    state = scope.get("state") or {}
    for key in _PRINCIPAL_KEYS:
        if state.get(key) is not None:
            return state[key]
    return None


def record(scope: Scope, request_id: str, status: int, seconds: float) -> None:
    route, where, method = route_of(scope), door(scope["path"]), scope["method"]
    metrics.observe_request(where, method, route, status, seconds)
    p = _principal(scope)
    log.info(
        "%s %s %s %.1fms",
        method,
        scope["path"],
        status,
        seconds * 1000,
        extra={
            "request_id": request_id,
            "tenant_id": str(p.tenant_id) if p is not None else None,
            "key_id": str(p.key_id) if p is not None and p.key_id is not None else None,
            "door": where,
            "route": route,
            "method": method,
            "status": status,
            "duration_ms": round(seconds * 1000, 2),
        },
    )
