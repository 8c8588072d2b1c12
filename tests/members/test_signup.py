"""Self-serve sign-up over HTTP: the organisation, its verification by the mailed link (through a
real SMTP conversation), signing in with OAuth afterwards, and the refusals."""

from __future__ import annotations

import logging
import uuid

import httpx
import pytest

from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from memvault.mail import LogMailer, Message
from memvault.members.links import INVITE_TYP, VERIFY_TYP
from memvault.members.signup import VERIFY_PATH
from tests.conftest import Tenant, running
from tests.dashboard.conftest import csrf_in
from tests.members.conftest import SIGNUP_LIMIT, email, org_name, sign_up, submit
from tests.members.smtp import SmtpStub
from tests.oauth.conftest import PASSWORD, Browser, Server, User, mcp_ping, obtain_tokens, pkce, register
from tests.oauth.conftest import authorization_url as auth_url
from tests.servers import served


async def _signup(http: httpx.AsyncClient, server: Server, **body: str) -> httpx.Response:
    return await http.post(f"{server.base}/v1/signup", json={"password": PASSWORD, **body})


class TestSignup:
    async def test_sign_up_verify_then_sign_in(self, http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub) -> None:
        address, name = email(), org_name()
        r = await _signup(http, mserver, email=address.upper(), organisation=name, namespace="notes")
        assert r.status_code == 201, r.text
        assert r.json() == {"organisation": name, "namespace": "notes", "email": address, "verification": "sent"}
        [mail] = smtp.to(address)
        assert name in mail.subject and mail.sender == "no-reply@localhost"
        link = mail.link(VERIFY_PATH)
        assert link.startswith(f"{mserver.base}/signup/verify?token=")

        # Unverified: the password is right, and still no sign-in.
        owner = User(uuid.uuid4(), address, Tenant(uuid.uuid4(), name, "", "notes"))
        client = await register(http, mserver)
        _, challenge = pkce()
        url = auth_url(mserver, client["client_id"], challenge)
        refused = await Browser(http, owner).sign_in(url)
        assert refused.status_code == 401 and "Verify your email" in refused.text

        # Following the link shows a button; nothing is verified by the GET (mail scanners follow links).
        page = await http.get(link)
        assert page.status_code == 200 and "<form" in page.text and "<script" not in page.text
        token = mail.token(VERIFY_PATH)
        r = await http.post(f"{mserver.base}/v1/signup/verify", json={"token": token})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["organisation"] == name and body["namespace"] == "notes" and not body["already_verified"]
        key, tenant_id = body["api_key"], uuid.UUID(body["tenant_id"])
        assert key.startswith("mv")
        again = (await http.post(f"{mserver.base}/v1/signup/verify", json={"token": token})).json()
        assert again["already_verified"] and again["api_key"] is None

        # The organisation: on the sign-up plan, with its owner, reachable with the key.
        assert (await mserver.api._plans.of(tenant_id)).name == "free"
        members = (await http.get(f"{mserver.base}/v1/members", headers={"Authorization": f"Bearer {key}"})).json()
        [me] = members["data"]
        assert me["email"] == address and me["role"] == "owner" and me["email_verified_at"] is not None
        assert me["scopes"] == ["read", "write", "admin", "act_as"] and members["next_cursor"] is None

        # Verified: the owner signs in to an MCP client; OAuth grants memory access, never admin.
        owner = User(uuid.UUID(me["id"]), address, Tenant(tenant_id, name, key, "notes"))
        tokens = await obtain_tokens(http, mserver, owner)
        assert tokens.body["scope"] == "read write"
        assert (await mcp_ping(http, mserver, tokens.access_token)).status_code == 200

    async def test_the_html_page_signs_up_too(self, http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub) -> None:
        page = await http.get(f"{mserver.base}/signup")
        assert page.status_code == 200 and '<form method="post" action="/signup"' in page.text
        assert "<script" not in page.text and page.headers["x-frame-options"] == "DENY"
        address, name = email(), org_name()
        form = {"email": address, "password": PASSWORD, "organisation": name}
        forged = await http.post(
            f"{mserver.base}/signup",
            data={**form, "csrf": csrf_in(page.text)},
            headers={"Origin": "https://evil.example"},
        )
        assert forged.status_code == 403 and smtp.to(address) == []
        r = await submit(http, f"{mserver.base}/signup", form)
        assert r.status_code == 201 and "Check your mail" in r.text
        link = smtp.to(address)[-1].link(VERIFY_PATH)
        done = await submit(http, link, {"token": link.split("?token=", 1)[1]})
        assert done.status_code == 200 and "shown this once" in done.text
        weak = await submit(http, f"{mserver.base}/signup", {**form, "password": "short"})
        assert weak.status_code == 422 and "at least 10 characters" in weak.text

    async def test_the_same_email_again_makes_another_organisation(
        self, http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub
    ) -> None:
        """Nothing in the answer says the address signed up before."""
        address = email()
        first = await sign_up(http, mserver, smtp, address=address)
        r = await _signup(http, mserver, email=address, organisation=(second := org_name()))
        assert r.status_code == 201 and r.json()["organisation"] == second
        assert first.owner.tenant.name != second and len(smtp.to(address)) == 2

    async def test_refusals_store_nothing(self, http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub) -> None:
        taken = await sign_up(http, mserver, smtp)
        r = await _signup(http, mserver, email=email(), organisation=taken.name)
        assert r.status_code == 409 and r.json()["code"] == "tenant_exists"
        address, name = email(), org_name()
        r = await _signup(http, mserver, email=address, organisation=name, namespace="bad name")
        assert r.status_code == 422
        # The mail server refuses: the organisation is not kept, so its name is free again.
        smtp.refuse = True
        r = await _signup(http, mserver, email=address, organisation=name)
        assert r.status_code == 503 and r.json()["code"] == "mail_unavailable"
        assert smtp.to(address) == []

    async def test_the_name_of_a_failed_sign_up_is_free(
        self, http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub
    ) -> None:
        name = org_name()
        smtp.refuse = True
        assert (await _signup(http, mserver, email=email(), organisation=name)).status_code == 503
        smtp.refuse = False
        assert (await _signup(http, mserver, email=email(), organisation=name)).status_code == 201

    async def test_limited_per_address(self, http: httpx.AsyncClient, mserver: Server) -> None:
        # Refused attempts count too: the limit is on trying, before any work.
        for _ in range(SIGNUP_LIMIT):
            r = await _signup(http, mserver, email=email(), organisation=org_name(), password="short")
            assert r.status_code == 422 and r.json()["code"] == "weak_password"
        r = await _signup(http, mserver, email=email(), organisation=org_name())
        assert r.status_code == 429 and r.json()["code"] == "rate_limited"
        assert int(r.headers["retry-after"]) > 0

    async def test_resend_says_the_same_for_any_address(
        self, http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub
    ) -> None:
        address = email()
        assert (await _signup(http, mserver, email=address, organisation=org_name())).status_code == 201
        unknown = await http.post(f"{mserver.base}/v1/signup/resend", json={"email": email()})
        known = await http.post(f"{mserver.base}/v1/signup/resend", json={"email": address})
        assert unknown.status_code == known.status_code == 202 and unknown.content == known.content
        assert len(smtp.to(address)) == 2


class TestLinks:
    async def _token(self, mserver: Server, smtp: SmtpStub, http: httpx.AsyncClient) -> str:
        address = email()
        assert (await _signup(http, mserver, email=address, organisation=org_name())).status_code == 201
        return smtp.to(address)[-1].token(VERIFY_PATH)

    async def test_forged_tokens_are_refused(self, http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub) -> None:
        token = await self._token(mserver, smtp, http)
        head, claims, sig = token.split(".")
        forged = f"{head}.{claims}.{sig[:-4]}{'AAAA' if not sig.endswith('AAAA') else 'BBBB'}"
        for bad in (forged, "not-a-token", f"{head}.{claims}."):
            r = await http.post(f"{mserver.base}/v1/signup/verify", json={"token": bad})
            assert r.status_code == 400 and r.json()["code"] == "invalid_link", r.text
        # A genuine token of another kind (an invitation) is no verification.
        other = await mserver.api._sign_link(INVITE_TYP, VERIFY_PATH, {"tid": str(uuid.uuid4()), "sub": "x"}, 60)
        r = await http.post(f"{mserver.base}/v1/signup/verify", json={"token": other})
        assert r.status_code == 400 and r.json()["code"] == "invalid_link"

    async def test_an_expired_link_is_refused(self, http: httpx.AsyncClient, mserver: Server) -> None:
        stale = await mserver.api._sign_link(VERIFY_TYP, VERIFY_PATH, {"tid": str(uuid.uuid4()), "sub": "x"}, -120)
        r = await http.post(f"{mserver.base}/v1/signup/verify", json={"token": stale})
        assert r.status_code == 410 and r.json()["code"] == "link_expired"


async def test_closed_sign_up_is_refused(
    http: httpx.AsyncClient, settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder, smtp: SmtpStub
) -> None:
    closed = settings.model_copy(update={"signup": "closed"})
    async with running(create_app(closed, urls=pg_urls, embedder=embedder)) as app, served(app) as base:
        address = email()
        r = await http.post(
            f"{base}/v1/signup", json={"email": address, "password": PASSWORD, "organisation": org_name()}
        )
        assert r.status_code == 403 and r.json()["code"] == "signup_closed"
        page = await http.get(f"{base}/signup")
        assert "Sign-up is closed" in page.text and "<form" not in page.text
    assert smtp.to(address) == []


async def test_the_log_mailer_prints_the_message(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="memvault.mail"):
        await LogMailer().send(Message("ana@example.com", "Verify", "http://x/signup/verify?token=abc"))
    assert "ana@example.com" in caplog.text and "token=abc" in caplog.text
