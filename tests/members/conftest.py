"""A server whose mail goes over SMTP to a stub on loopback (tests/members/smtp.py), with a low
sign-up limit, and helpers to sign up and verify over HTTP."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import pytest

from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from tests.conftest import Tenant, make_tenant, running
from tests.dashboard.conftest import csrf_in
from tests.members.smtp import SmtpStub
from tests.oauth.conftest import PASSWORD, Server, User
from tests.servers import free_port, served

SIGNUP_LIMIT = 3


@pytest.fixture(scope="session")
async def smtp() -> AsyncIterator[SmtpStub]:
    stub = SmtpStub()
    await stub.start()
    yield stub
    await stub.stop()


@pytest.fixture(scope="session")
async def mserver(
    settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder, smtp: SmtpStub
) -> AsyncIterator[Server]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    own = settings.model_copy(
        update={
            "public_url": base,
            "mailer": "smtp",
            "smtp_host": "127.0.0.1",
            "smtp_port": smtp.port,
            "smtp_starttls": False,
            "signup_limit": f"{SIGNUP_LIMIT}/minute",
        }
    )
    async with running(create_app(own, urls=pg_urls, embedder=embedder)) as app, served(app, port):
        yield Server(base, app)


@pytest.fixture(autouse=True)
def _fresh_mail(smtp: SmtpStub) -> None:
    smtp.messages.clear()
    smtp.refuse = False


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as c:
        yield c


def email() -> str:
    return f"m-{uuid.uuid4().hex[:10]}@example.com"


def org_name() -> str:
    return f"Org {uuid.uuid4().hex[:8]}"


@dataclass
class Organisation:
    name: str
    owner: User
    key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


async def sign_up(
    http: httpx.AsyncClient, server: Server, smtp: SmtpStub, *, address: str | None = None, name: str | None = None
) -> Organisation:
    """POST /v1/signup, then follow the mailed link: an organisation with a verified owner."""
    address, name = address or email(), name or org_name()
    r = await http.post(f"{server.base}/v1/signup", json={"email": address, "password": PASSWORD, "organisation": name})
    assert r.status_code == 201, r.text
    token = smtp.to(address)[-1].token("/signup/verify")
    r = await http.post(f"{server.base}/v1/signup/verify", json={"token": token})
    assert r.status_code == 200, r.text
    body = r.json()
    tenant = Tenant(id=uuid.UUID(body["tenant_id"]), name=name, key=body["api_key"], namespace=body["namespace"])
    members = (await http.get(f"{server.base}/v1/members", headers={"Authorization": f"Bearer {tenant.key}"})).json()
    owner_id = uuid.UUID(members["data"][0]["id"])
    return Organisation(name, User(owner_id, address, tenant), body["api_key"])


async def invite_and_accept(
    http: httpx.AsyncClient, server: Server, smtp: SmtpStub, headers: dict[str, str], tenant: Tenant, role: str
) -> User:
    address = email()
    r = await http.post(f"{server.base}/v1/members/invitations", json={"email": address, "role": role}, headers=headers)
    assert r.status_code == 201, r.text
    token = smtp.to(address)[-1].token("/invitations/accept")
    r = await http.post(f"{server.base}/v1/invitations/accept", json={"token": token, "password": PASSWORD})
    assert r.status_code == 201, r.text
    return User(uuid.UUID(r.json()["member"]["id"]), address, tenant)


def origin(url: str) -> dict[str, str]:
    parts = urlsplit(url)
    return {"Origin": f"{parts.scheme}://{parts.netloc}", "Content-Type": "application/x-www-form-urlencoded"}


async def submit(
    http: httpx.AsyncClient, page_url: str, data: dict[str, str], *, csrf: str | None = None
) -> httpx.Response:
    """Open a page and post its form as a browser would: with our Origin, and the form token the
    page gave (its cookie is kept by ``http``); ``csrf=""`` posts none. The form's action is the
    page's path."""
    page = await http.get(page_url)
    assert page.status_code == 200, page.text
    token = csrf_in(page.text) if csrf is None else csrf
    action = urlsplit(page_url)._replace(query="").geturl()
    return await http.post(action, data={**data, **({"csrf": token} if token else {})}, headers=origin(page_url))


@pytest.fixture
async def tenant_x(mserver: Server) -> Tenant:
    return await make_tenant(mserver.api, "x")


@pytest.fixture
async def tenant_y(mserver: Server) -> Tenant:
    return await make_tenant(mserver.api, "y")
