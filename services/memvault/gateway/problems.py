"""Every 4xx/5xx leaves as problem JSON (RFC 9457) with a stable `code` and the request id; under
/dashboard the same problem as a page (web/errors.py)."""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from memvault.db.session import unavailable
from memvault.errors import DatabaseUnavailable, MemvaultError
from memvault.fields import secret_error
from memvault.web.errors import html_problem, is_page

log = logging.getLogger(__name__)

PROBLEM = "application/problem+json"
_STATUSES = {s.value for s in HTTPStatus}
# Same titles as the MemvaultError classes and the body-limit middleware give.
_TITLES = {404: "Not found", 413: "Request body too large"}

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}


def problem_response(request: Request, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    rid = getattr(request.state, "request_id", None)
    if rid:
        body["request_id"] = rid
    if is_page(request):
        return html_problem(request, body, headers)
    out_headers = dict(headers or {})
    if body["status"] == 401:
        out_headers.setdefault("WWW-Authenticate", 'Bearer realm="memvault"')
    return JSONResponse(body, status_code=body["status"], media_type=PROBLEM, headers=out_headers)


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    # ("body", "memories", 3, "content") -> "memories[3].content"; drop the location kind.
    parts = list(loc[1:]) if loc and loc[0] in ("body", "query", "path", "header") else list(loc)
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or str(loc[0] if loc else "")


def _error(e: Any) -> dict[str, str]:
    """One validation error as the problem lists it. A JSON syntax error's location is the
    character where parsing stopped (("body", 24) read "[24]: JSON decode error"): it is the body's
    error, and the position goes into the message with the parser's reason."""
    if e.get("type") == "json_invalid":
        loc = e.get("loc", ())
        at = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
        reason = (e.get("ctx") or {}).get("error")
        message = f"not valid JSON{at}" + (f" ({reason})" if reason else "")
        return {"field": "body", "message": message, "type": "json_invalid"}
    return {"field": _field(e.get("loc", ())), "message": e.get("msg", ""), "type": e.get("type", "")}


def install(app: FastAPI) -> None:
    @app.exception_handler(MemvaultError)
    async def _memvault(request: Request, exc: MemvaultError) -> Response:
        return problem_response(request, exc.problem(), exc.response_headers())

    # The database sessions raise DatabaseUnavailable themselves (db/session.py); this catches a
    # lost connection met outside them, so that it too is a 503 the client may retry, not a 500.
    @app.exception_handler(DBAPIError)
    @app.exception_handler(SQLAlchemyTimeoutError)
    async def _database(request: Request, exc: Exception) -> Response:
        if not unavailable(exc):
            return await _unexpected(request, exc)
        log.warning("database unreachable on %s %s: %s", request.method, request.url.path, exc)
        return await _memvault(request, DatabaseUnavailable())

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> Response:
        # The secrets guard runs inside the request models (fields.Body): its refusal keeps its own code.
        for e in exc.errors():
            if e.get("type") == "secret_detected":
                return problem_response(request, secret_error(e, _field(e.get("loc", ()))).problem())
        errors = [_error(e) for e in exc.errors()]
        first = errors[0] if errors else {"field": "", "message": "invalid input"}
        return problem_response(
            request,
            {
                "type": "https://memvault.dev/errors/validation_error",
                "title": "Invalid input",
                "status": 422,
                "detail": f"{first['field']}: {first['message']}" if first["field"] else first["message"],
                "code": "validation_error",
                "field": first["field"],
                "errors": errors,
            },
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 400 and isinstance(exc.__cause__, ValueError | RecursionError):
            # FastAPI answers 400 for a body that is not UTF-8 or nests too deep for the JSON parser
            # (a JSON syntax error is already a 422): the docs promise 422 for every unreadable body.
            return problem_response(
                request,
                {
                    "type": "https://memvault.dev/errors/validation_error",
                    "title": "Invalid input",
                    "status": 422,
                    "detail": "body: the request body is not valid JSON (UTF-8, at most a few hundred levels deep)",
                    "code": "validation_error",
                    "field": "body",
                    "errors": [{"field": "body", "message": "JSON decode error", "type": "json_invalid"}],
                },
            )
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        return problem_response(
            request,
            {
                "type": f"https://memvault.dev/errors/{code}",
                "title": _TITLES.get(exc.status_code)
                or (HTTPStatus(exc.status_code).phrase if exc.status_code in _STATUSES else "HTTP error"),
                "status": exc.status_code,
                "detail": str(exc.detail),
                "code": code,
            },
            headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem_response(
            request,
            {
                "type": "https://memvault.dev/errors/internal_error",
                "title": "Internal error",
                "status": 500,
                "detail": "Something went wrong on our side; the request id identifies it in our logs.",
                "code": "internal_error",
            },
        )
