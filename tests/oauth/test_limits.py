"""Rate limits on sign-in, registration and the token endpoint (issue 27 item 9), over real HTTP
from several loopback addresses (127.0.0.x: the server sees each as another client)."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from memvault.oauth.schemas import UserIn
from tests.conftest import Tenant
from tests.oauth.conftest import (
    PASSWORD,
    Browser,
    Server,
    User,
    authorization_url,
    exchange,
    hidden_fields,
    pkce,
    post_form,
    redirect_params,
    register,
)


@asynccontextmanager
async def client_at(address: str) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.AsyncHTTPTransport(local_address=address)
    async with httpx.AsyncClient(transport=transport, timeout=30) as http:
        yield http


async def sign_in_url(http: httpx.AsyncClient, server: Server) -> str:
    client = await register(http, server)
    return authorization_url(server, client["client_id"], pkce()[1])


@pytest.mark.slow  # dozens of Argon2id hashes per test
class TestSignIn:
    async def test_a_guesser_backs_off_and_the_owner_elsewhere_still_signs_in(
        self, oauth_server: Server, user_a: User
    ) -> None:
        async with client_at("127.0.0.2") as attacker, client_at("127.0.0.3") as owner:
            url = await sign_in_url(attacker, oauth_server)
            guesser = Browser(attacker, user_a)
            for _ in range(5):
                assert (await guesser.sign_in(url, password="wrong password 1")).status_code == 401
            r = await guesser.sign_in(url, password="wrong password 2")
            assert r.status_code == 429 and 1 <= int(r.headers["retry-after"]) <= 60
            assert "retry in" in r.text and "<form" in r.text  # a page that says when, not an error dump
            # Even the right password waits at that address: the limit is not an oracle for it.
            assert (await guesser.sign_in(url)).status_code == 429

            # The owner, somewhere else, is not locked out by it.
            url = await sign_in_url(owner, oauth_server)
            page = await Browser(owner, user_a).sign_in(url)
            assert page.status_code == 200 and "Allow" in page.text

    async def test_a_success_clears_the_count(self, oauth_server: Server, user_a: User) -> None:
        async with client_at("127.0.0.4") as http:
            url = await sign_in_url(http, oauth_server)
            person = Browser(http, user_a)
            for _ in range(4):
                assert (await person.sign_in(url, password="typo typo typo")).status_code == 401
            assert (await person.sign_in(url)).status_code == 200
            for _ in range(4):
                assert (await person.sign_in(url, password="typo typo typo")).status_code == 401

    async def test_one_address_trying_many_accounts_is_limited(self, oauth_server: Server, tenant_a: Tenant) -> None:
        async with client_at("127.0.0.5") as http:
            url = await sign_in_url(http, oauth_server)
            statuses = []
            for _ in range(31):
                stranger = User(uuid.uuid4(), f"nobody-{uuid.uuid4().hex[:8]}@example.com", tenant_a)
                statuses.append((await Browser(http, stranger).sign_in(url)).status_code)
            assert statuses[:30] == [401] * 30 and statuses[30] == 429


class TestProtocolEndpoints:
    async def test_registration_flood_gets_429_problem_json(self, oauth_server: Server) -> None:
        async with client_at("127.0.0.6") as http:
            body = {"redirect_uris": ["http://127.0.0.1:9/cb"]}
            codes = [(await http.post(f"{oauth_server.base}/oauth/register", json=body)).status_code for _ in range(20)]
            assert codes == [201] * 20
            r = await http.post(f"{oauth_server.base}/oauth/register", json=body)
            assert r.status_code == 429 and r.headers["content-type"].startswith("application/problem+json")
            assert r.json()["code"] == "rate_limited" and int(r.headers["retry-after"]) >= 1

    async def test_token_endpoint_guessing_gets_429(self, oauth_server: Server) -> None:
        async with client_at("127.0.0.7") as http:
            form = {
                "grant_type": "authorization_code",
                "client_id": "mvc_x",
                "code": "guess",
                "code_verifier": "v" * 43,
            }
            for _ in range(60):
                assert (await http.post(f"{oauth_server.base}/oauth/token", data=form)).status_code == 400
            r = await http.post(f"{oauth_server.base}/oauth/token", data=form)
            assert r.status_code == 429 and r.json()["code"] == "rate_limited" and "retry-after" in r.headers


def _tid(token: str) -> str:
    part = token.split(".")[1]
    return str(json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))["tid"])


@pytest.mark.slow  # Argon2id hashes per tenant
class TestOneEmailInTwoTenants:
    """Users are per tenant (item 10): the same address may be a user of two, each signs in to its own."""

    async def _tokens_for(self, http: httpx.AsyncClient, server: Server, email: str, password: str, **form: str) -> str:
        client = await register(http, server)
        verifier, challenge = pkce()
        url = authorization_url(server, client["client_id"], challenge)
        page = await http.get(url)
        fields = [*hidden_fields(page.text), ("email", email), ("password", password), *form.items()]
        consent = await post_form(http, f"{server.base}/oauth/authorize", fields)
        assert consent.status_code == 200, consent.text
        user = User(uuid.uuid4(), email, None)  # type: ignore[arg-type]
        code = redirect_params(await Browser(http, user).consent(consent, url))["code"]
        r = await exchange(http, server, client["client_id"], code, verifier)
        return str(r.json()["access_token"])

    async def test_each_password_leads_to_its_tenant_and_a_shared_one_asks(
        self, oauth_server: Server, http: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        api = oauth_server.api
        email = f"both-{uuid.uuid4().hex[:8]}@example.com"
        await api.create_user(tenant_a.principal, UserIn(email=email, password=PASSWORD))
        await api.create_user(tenant_b.principal, UserIn(email=email, password="another long password"))
        assert _tid(await self._tokens_for(http, oauth_server, email, PASSWORD)) == str(tenant_a.id)
        assert _tid(await self._tokens_for(http, oauth_server, email, "another long password")) == str(tenant_b.id)

        # The same password in both: the person chooses among the accounts it opened, and only those.
        shared = f"same-{uuid.uuid4().hex[:8]}@example.com"
        for t in (tenant_a, tenant_b):
            await api.create_user(t.principal, UserIn(email=shared, password=PASSWORD))
        url = await sign_in_url(http, oauth_server)
        page = await Browser(http, User(uuid.uuid4(), shared, tenant_a)).sign_in(url)
        assert page.status_code == 200 and "several accounts" in page.text
        assert tenant_a.name in page.text and tenant_b.name in page.text
        token = await self._tokens_for(http, oauth_server, shared, PASSWORD, account=tenant_b.name)
        assert _tid(token) == str(tenant_b.id)
