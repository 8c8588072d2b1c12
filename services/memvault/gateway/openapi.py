"""The OpenAPI description, made honest once for every route: the bearer scheme and the scope each
route needs, and the problem JSON (RFC 9457) that every error status really answers.

FastAPI documents only what a route's signature shows: a 422 with its own `HTTPValidationError`
(which we never send: problems.py renders validation errors as problem JSON) and nothing about
authentication or the errors the facade raises. Rather than a `responses=` on each route, this
post-processes the generated document from what each route is made of (its dependencies, path
parameters, body and method), so the next route is described without anyone remembering.
Schemathesis (tests/gateway/test_schemathesis.py) checks the result against real responses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts

from memvault.gateway.deps import BEARER_SCHEME, OPTIONAL_AUTH, current_principal
from memvault.gateway.idempotency import IDEMPOTENT
from memvault.gateway.problems import PROBLEM

# One schema for every error body; `additionalProperties` because MemvaultError.extra adds
# error-specific members (`field`, `kind`, `existing_id`, `job_status`, ...).
PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "description": "An error as RFC 9457 problem JSON. Branch on `code`, which is stable (docs/api.md).",
    "type": "object",
    "required": ["type", "title", "status", "detail", "code"],
    "properties": {
        "type": {"type": "string", "description": "A URI naming the kind of error."},
        "title": {"type": "string"},
        "status": {"type": "integer", "minimum": 400, "maximum": 599},
        "detail": {"type": "string"},
        "code": {"type": "string", "description": "Stable machine-readable error code."},
        "request_id": {"type": "string", "description": "Also in the X-Request-ID header; finds the request in logs."},
        "field": {"type": "string", "description": "Validation errors: where the first is (`memories[3].content`)."},
        "errors": {
            "type": "array",
            "description": "Validation errors: every error found.",
            "items": {
                "type": "object",
                "properties": {"field": {"type": "string"}, "message": {"type": "string"}, "type": {"type": "string"}},
            },
        },
    },
    "additionalProperties": True,
}

_DESCRIPTIONS = {
    400: "A signed link's token is forged, malformed or of another kind (`invalid_link`).",
    401: "No bearer credential, or not a valid, unrevoked API key (`WWW-Authenticate: Bearer`).",
    403: "The key lacks the scope, or the namespace is outside its allow-list.",
    404: "No such thing in your tenant (another tenant's ids get the same answer).",
    409: "The change conflicts with the current state, or the same Idempotency-Key is still running.",
    410: "A signed link has expired or its invitation was revoked (`link_expired`).",
    413: "The body is over the server's limit (declared or streamed).",
    422: "The body, query, path or a header does not validate, or the text looks like a secret.",
    429: "Too many attempts from this address (`rate_limited`); `Retry-After` says when to retry.",
    503: "A backend (database, embedding provider) is unavailable; nothing was stored. Retry later.",
}
# Set (by ``answers``) on an endpoint that takes no key but answers further problem statuses.
EXTRA_STATUSES = "memvault_extra_statuses"
Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


def answers(*statuses: int) -> Callable[[Endpoint], Endpoint]:
    """Declare the problem statuses an unauthenticated route answers beyond the usual ones."""

    def mark(fn: Endpoint) -> Endpoint:
        setattr(fn, EXTRA_STATUSES, frozenset(statuses))
        return fn

    return mark


_WRITES = {"post", "put", "patch", "delete"}


def _walk(dependant: Dependant) -> list[Dependant]:
    out = [dependant]
    for sub in dependant.dependencies:
        out.extend(_walk(sub))
    return out


def _scopes(route: Any) -> list[str] | None:
    """The scopes a route requires (``[]``: any valid key), or None when it takes no key."""
    calls = _walk(route.dependant)
    if not any(d.call is current_principal for d in calls):
        return None
    return sorted({scope for d in calls if (scope := getattr(d.call, "required_scope", None))})


def _statuses(route: Any, method: str, op: dict[str, Any], scopes: list[str] | None) -> set[int]:
    # No /v1 route answers 429 yet (the rate limiter guards sign-in, registration and tokens, which
    # are not in this document); per-key limits (issue 23) add 429 here, for every keyed route.
    statuses = {503, *getattr(route.endpoint, EXTRA_STATUSES, ())}
    if scopes is not None:
        statuses |= {401, 403}
    if getattr(route.endpoint, OPTIONAL_AUTH, False):
        statuses.add(401)
    # A path id, or a namespace named in the query (the audit log's filter), may not exist.
    if "{" in route.path_format or any(p.get("name") == "namespace" for p in op.get("parameters", [])):
        statuses.add(404)
    # A conflict needs a change: read routes that POST a query (search, context) never answer 409.
    if method in _WRITES and scopes is not None and set(scopes) & {"write", "admin"}:
        statuses.add(409)
    # The body limit holds for every body, also one a route reads itself (import) and does not declare.
    if "requestBody" in op or method in {"post", "put", "patch"}:
        statuses.add(413)
    idempotent = any(d.call is IDEMPOTENT.dependency for d in _walk(route.dependant))
    if op.get("parameters") or "requestBody" in op or idempotent:
        statuses.add(422)
    return statuses


def describe(app: FastAPI, schema: dict[str, Any]) -> dict[str, Any]:
    """Add the security requirements and problem responses to FastAPI's generated ``schema``."""
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas["Problem"] = PROBLEM_SCHEMA
    components.setdefault("securitySchemes", {})[BEARER_SCHEME] = {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "memvault API key",
        "description": (
            "A memvault API key (`Authorization: Bearer mv_...`). Its scopes (read, write, admin) and its "
            "namespace allow-list decide what it reaches; each operation lists the scope it needs. "
            "OAuth 2.1 access tokens are for `/mcp` only (docs/auth.md) and are refused here."
        ),
    }
    ref = {"$ref": "#/components/schemas/Problem"}
    # Routes included from routers come wrapped (FastAPI >= 0.160); this walks them as get_openapi does.
    for route in iter_route_contexts(app.routes):
        if not isinstance(route.original_route, APIRoute) or not route.include_in_schema:
            continue
        for method in route.methods or ():
            op = schema.get("paths", {}).get(route.path_format, {}).get(method.lower())
            if op is None:
                continue
            scopes = _scopes(route)
            if scopes is not None:
                op["security"] = [{BEARER_SCHEME: scopes}]
            elif getattr(route.endpoint, OPTIONAL_AUTH, False):
                op["security"] = [{}, {BEARER_SCHEME: []}]
            else:
                # Said outright: no credential (sign-up, an invitation's acceptance, OAuth's own
                # endpoints), so a client generator does not send a key there and a reader sees it.
                op["security"] = []
            responses = op.setdefault("responses", {})
            for status in sorted(_statuses(route, method.lower(), op, scopes)):
                responses[str(status)] = {"description": _DESCRIPTIONS[status], "content": {PROBLEM: {"schema": ref}}}
    # Nothing refers to FastAPI's own validation-error shapes any more: we never send them.
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    return schema


def install(app: FastAPI) -> None:
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = describe(app, generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
