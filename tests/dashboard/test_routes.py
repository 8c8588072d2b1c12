"""Every dashboard route, found in the app as served: none opens without a session. A new page is
covered here the moment it is added, with nobody remembering to list it."""

from __future__ import annotations

import re
import uuid

import pytest
from fastapi.routing import iter_route_contexts

from memvault.app import create_app
from memvault.config import Settings
from tests.dashboard.conftest import Browser

# Open before sign-in, by design.
ANONYMOUS = {("GET", "/dashboard/signin"), ("POST", "/dashboard/signin")}


def _routes() -> list[tuple[str, str]]:
    app = create_app(Settings(_env_file=None))
    found = {
        (method, ctx.path)
        for ctx in iter_route_contexts(app.routes)
        if ctx.path is not None and (ctx.path == "/dashboard" or ctx.path.startswith("/dashboard/"))
        for method in ctx.methods or ()
        if method != "HEAD"
    }
    return sorted(found - ANONYMOUS)


ROUTES = _routes()


def _concrete(path: str) -> str:
    # Any id: without a session nothing is looked up.
    return re.sub(r"\{[^}]+\}", str(uuid.uuid4()), path)


def test_the_dashboard_has_pages() -> None:
    assert ("GET", "/dashboard") in ROUTES and ("POST", "/dashboard/signout") in ROUTES


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
async def test_no_page_opens_without_a_session(browser: Browser, method: str, path: str) -> None:
    url = _concrete(path)
    if method == "GET":
        r = await browser.get(url)
        assert r.status_code == 303 and r.headers["location"].startswith("/dashboard/signin?next=")
    else:
        r = await browser.http.request(method, url, data={"csrf": "x"}, headers={"Origin": "http://memvault.test"})
        assert r.status_code == 401 and r.headers["content-type"].startswith("text/html")


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
async def test_a_cookie_that_is_no_session_opens_nothing(browser: Browser, method: str, path: str) -> None:
    browser.http.cookies.set("mv_session", "forged-" + uuid.uuid4().hex, domain="memvault.test", path="/dashboard")
    r = await browser.http.request(
        method, _concrete(path), data={"csrf": "x"}, headers={"Origin": "http://memvault.test"}
    )
    assert r.status_code in (303, 401)
