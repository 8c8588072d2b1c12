"""The dashboard over real HTTP semantics (httpx through the ASGI app, cookies kept by the client):
members of fresh tenants signed in with their passwords, and forms posted with the token the page
gave them, as a browser would. tests/browser drives the same pages in Chromium."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from html import unescape
from typing import Any

import httpx
import pytest

from memvault.api import NamespaceAPI
from memvault.oauth.schemas import UserIn
from tests.conftest import Tenant

ORIGIN = "http://memvault.test"
PASSWORD = "correct horse battery"
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_in(html: str) -> str:
    found = _CSRF.search(html)
    assert found, "the page has no form token"
    return unescape(found.group(1))


@dataclass
class Browser:
    """An httpx client that behaves like a browser on our pages: it keeps cookies, sends our
    Origin with form posts, and posts each form with the token of the page it came from."""

    http: httpx.AsyncClient
    last_page: str = ""

    async def get(self, path: str, **kwargs: Any) -> httpx.Response:
        r = await self.http.get(path, **kwargs)
        if r.headers.get("content-type", "").startswith("text/html"):
            self.last_page = r.text
        return r

    async def post(self, path: str, data: dict[str, Any] | None = None, *, csrf: str | None = None) -> httpx.Response:
        """Post a form; its token is the last page's unless given ("" posts none)."""
        fields = dict(data or {})
        token = csrf_in(self.last_page) if csrf is None else csrf
        if token:
            fields["csrf"] = token
        r = await self.http.post(path, data=fields, headers={"Origin": ORIGIN})
        if r.headers.get("content-type", "").startswith("text/html"):
            self.last_page = r.text
        return r

    async def sign_in(self, email: str, password: str = PASSWORD) -> httpx.Response:
        await self.get("/dashboard/signin")
        r = await self.post("/dashboard/signin", {"email": email, "password": password, "next": "/dashboard"})
        assert r.status_code == 303, r.text
        return r


@pytest.fixture
async def browser(app: object) -> AsyncIterator[Browser]:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as http:
        yield Browser(http)


@pytest.fixture
async def second_browser(app: object) -> AsyncIterator[Browser]:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as http:
        yield Browser(http)


async def add_member(api: NamespaceAPI, tenant: Tenant, role: str = "owner", **fields: Any) -> str:
    """A signed-up member of ``tenant`` with PASSWORD; their email."""
    email = f"{role}-{uuid.uuid4().hex[:10]}@example.com"
    await api.create_user(tenant.principal, UserIn(email=email, password=PASSWORD, role=role, **fields))
    return email


@pytest.fixture
async def owner_of_a(api: NamespaceAPI, tenant_a: Tenant) -> str:
    return await add_member(api, tenant_a, "owner")


@pytest.fixture
async def signed_in(browser: Browser, owner_of_a: str) -> Browser:
    """An owner of tenant A, signed in."""
    await browser.sign_in(owner_of_a)
    return browser
