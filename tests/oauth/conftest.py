"""OAuth test fixtures: an app whose public URL is the loopback port it is served on (issuer,
resource and redirects must name the real address), a browser that fills in the sign-in and
consent forms over HTTP, and helpers for the raw protocol steps."""

from __future__ import annotations

import base64
import hashlib
import html
import re
import secrets
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from memvault.api import NamespaceAPI
from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from memvault.oauth.schemas import UserIn
from tests.conftest import Tenant, running
from tests.servers import free_port, served

PASSWORD = "correct horse battery"
REDIRECT = "http://127.0.0.1:33418/callback"


@dataclass
class Server:
    base: str
    app: Any

    @property
    def api(self) -> NamespaceAPI:
        return self.app.state.api

    @property
    def mcp(self) -> str:
        return f"{self.base}/mcp"


@pytest.fixture(scope="session")
async def oauth_server(settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder) -> AsyncIterator[Server]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # Client metadata documents are served from loopback http in these tests.
    own = settings.model_copy(update={"public_url": base, "oauth_cimd_allow_insecure": True})
    async with running(create_app(own, urls=pg_urls, embedder=embedder)) as app, served(app, port):
        yield Server(base, app)


@dataclass
class User:
    id: uuid.UUID
    email: str
    tenant: Tenant
    password: str = PASSWORD


async def make_user(api: NamespaceAPI, tenant: Tenant, *, scopes: list[str] | None = None) -> User:
    email = f"user-{uuid.uuid4().hex[:10]}@example.com"
    body = UserIn(email=email, password=PASSWORD, scopes=scopes or ["read", "write"])  # type: ignore[arg-type]
    out = await api.create_user(tenant.principal, body)
    return User(out.id, email, tenant)


@pytest.fixture
async def user_a(oauth_server: Server, tenant_a: Tenant) -> User:
    return await make_user(oauth_server.api, tenant_a)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as c:
        yield c


_HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')
_CHECKED = re.compile(r'<input type="checkbox" name="namespace" value="([^"]+)" checked>')


def hidden_fields(page: str) -> list[tuple[str, str]]:
    return [(html.unescape(k), html.unescape(v)) for k, v in _HIDDEN.findall(page)]


class Browser:
    """What a person's browser does with the authorization URL: GET the sign-in page, post it,
    post the consent page, and stop at the redirect to the client (which it would follow)."""

    def __init__(self, http: httpx.AsyncClient, user: User) -> None:
        self.http = http
        self.user = user

    async def sign_in(self, authorization_url: str, *, password: str | None = None) -> httpx.Response:
        page = await self.http.get(authorization_url)
        assert page.status_code == 200, page.text
        assert "<form" in page.text and "<script" not in page.text
        action = _action(authorization_url)
        data = [*hidden_fields(page.text), ("email", self.user.email), ("password", password or self.user.password)]
        return await post_form(self.http, action, data)

    async def consent(
        self,
        consent_page: httpx.Response,
        authorization_url: str,
        *,
        namespaces: list[str] | None = None,
        scopes: list[str] | None = None,
        decision: str = "allow",
    ) -> httpx.Response:
        assert consent_page.status_code == 200, consent_page.text
        chosen = _CHECKED.findall(consent_page.text) if namespaces is None else namespaces
        data = [
            *hidden_fields(consent_page.text),
            *(("namespace", n) for n in chosen),
            *(("grant_scope", s) for s in (scopes or ["read", "write"])),
            ("decision", decision),
        ]
        return await post_form(self.http, _action(authorization_url), data)

    async def authorize(self, authorization_url: str, **consent: Any) -> httpx.Response:
        """Sign in and allow; the answer is the 303 to the client's redirect URI."""
        page = await self.sign_in(authorization_url)
        return await self.consent(page, authorization_url, **consent)


async def post_form(http: httpx.AsyncClient, url: str, data: list[tuple[str, str]]) -> httpx.Response:
    """A browser's form post (fields may repeat, which httpx's `data=` does not allow), with the
    Origin a browser sends: the page's own, since the form came from it."""
    parts = urlsplit(url)
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Origin": f"{parts.scheme}://{parts.netloc}"}
    return await http.post(url, content=urlencode(data), headers=headers)


def _action(authorization_url: str) -> str:
    parts = urlsplit(authorization_url)
    return f"{parts.scheme}://{parts.netloc}/oauth/authorize"


def redirect_params(r: httpx.Response) -> dict[str, str]:
    assert r.status_code == 303, r.text
    return {k: v[0] for k, v in parse_qs(urlsplit(r.headers["location"]).query).items()}


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


async def register(http: httpx.AsyncClient, server: Server, **extra: Any) -> dict[str, Any]:
    body = {"client_name": "Test Client", "redirect_uris": [REDIRECT], **extra}
    r = await http.post(f"{server.base}/oauth/register", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def authorization_url(server: Server, client_id: str, challenge: str, **overrides: str | None) -> str:
    params: dict[str, str | None] = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "state": "st-" + secrets.token_hex(4),
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "scope": "read write",
        "resource": server.mcp,
        **overrides,
    }
    return f"{server.base}/oauth/authorize?{urlencode({k: v for k, v in params.items() if v is not None})}"


@dataclass
class Tokens:
    client_id: str
    access_token: str
    refresh_token: str
    body: dict[str, Any]


async def obtain_tokens(
    http: httpx.AsyncClient, server: Server, user: User, *, namespaces: list[str] | None = None
) -> Tokens:
    """Register, authorize as ``user`` and exchange the code: the whole flow without the SDK."""
    client = await register(http, server)
    verifier, challenge = pkce()
    url = authorization_url(server, client["client_id"], challenge)
    code = redirect_params(await Browser(http, user).authorize(url, namespaces=namespaces))["code"]
    r = await exchange(http, server, client["client_id"], code, verifier)
    assert r.status_code == 200, r.text
    body = r.json()
    return Tokens(client["client_id"], body["access_token"], body["refresh_token"], body)


async def exchange(
    http: httpx.AsyncClient, server: Server, client_id: str, code: str, verifier: str, **extra: str
) -> httpx.Response:
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT,
        "client_id": client_id,
        "code_verifier": verifier,
        "resource": server.mcp,
        **extra,
    }
    return await http.post(f"{server.base}/oauth/token", data=data)


async def refresh(http: httpx.AsyncClient, server: Server, client_id: str, token: str) -> httpx.Response:
    data = {"grant_type": "refresh_token", "refresh_token": token, "client_id": client_id, "resource": server.mcp}
    return await http.post(f"{server.base}/oauth/token", data=data)


async def mcp_ping(http: httpx.AsyncClient, server: Server, token: str) -> httpx.Response:
    """One JSON-RPC request to /mcp with the bearer: 200 when it is let in, 401 otherwise."""
    return await http.post(
        server.mcp,
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-06-18",
        },
    )
