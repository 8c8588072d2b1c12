"""Errors met on a page answer as a page: the problem's status, title and detail in HTML, and a
page GET that needs a sign-in goes to the sign-in form. gateway/problems.py sends every problem
under /dashboard (and on the account pages) here, so a page cannot answer JSON by accident or a
500 by omission."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from starlette.responses import RedirectResponse, Response

from memvault.web.render import PAGE_HEADERS, page

PAGES_PREFIX = "/dashboard"
# The account pages before sign-in (dashboard/accounts.py) live outside /dashboard: their links
# are mailed, and their paths are older than the dashboard.
ACCOUNT_PAGES = frozenset({"/signup", "/signup/verify", "/invitations/accept"})


def is_page(request: Request) -> bool:
    path = request.url.path
    return path == PAGES_PREFIX or path.startswith(PAGES_PREFIX + "/") or path in ACCOUNT_PAGES


def html_problem(request: Request, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    if body["status"] == 401 and request.method == "GET":
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(
            f"/dashboard/signin?{urlencode({'next': target})}", status_code=303, headers=PAGE_HEADERS
        )
    response = page(
        "dashboard/error.html",
        {
            "title": body.get("title", "Error"),
            "detail": body.get("detail", ""),
            "code": body.get("code", ""),
            "request_id": body.get("request_id"),
        },
        status_code=body["status"],
    )
    for name, value in (headers or {}).items():
        if name.lower() != "www-authenticate":
            response.headers[name] = value
    return response
