"""A credential can never mint or reach more than it has (issue 27 item 1): a namespace-limited
admin key makes only users limited to its namespaces, so the escape (make a user, sign in over
OAuth, consent to another namespace, use it over MCP) fails at the first step that would mint
more; and it sees, disables and revokes only users and grants within its namespaces."""

from __future__ import annotations

import base64
import json
import uuid

import httpx
import pytest

from memvault.namespaces.schemas import NamespaceIn
from tests.conftest import Tenant
from tests.mcp.conftest import call, fails, mcp_session
from tests.oauth.conftest import (
    PASSWORD,
    Browser,
    Server,
    User,
    authorization_url,
    exchange,
    make_user,
    mcp_ping,
    obtain_tokens,
    pkce,
    redirect_params,
    register,
)


def _claims(token: str) -> dict[str, object]:
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


@pytest.fixture
async def limited(oauth_server: Server, http: httpx.AsyncClient, tenant_a: Tenant) -> dict[str, str]:
    """Tenant a with a second namespace `vault`, and an admin key limited to `default`."""
    await oauth_server.api.create_namespace(tenant_a.principal, NamespaceIn(name="vault"))
    r = await http.post(
        f"{oauth_server.base}/v1/keys",
        json={"name": "limited admin", "scopes": ["admin"], "namespaces": ["default"]},
        headers=tenant_a.headers,
    )
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['key']}"}


class TestTheEscapePath:
    async def test_limited_admin_cannot_reach_another_namespace_through_a_user(
        self, oauth_server: Server, http: httpx.AsyncClient, tenant_a: Tenant, limited: dict[str, str]
    ) -> None:
        base = oauth_server.base
        address = f"escape-{uuid.uuid4().hex[:8]}@example.com"
        # Step 1, asking outright: a user who may share `vault` is more than the key has.
        r = await http.post(
            f"{base}/v1/users", json={"email": address, "password": PASSWORD, "namespaces": ["vault"]}, headers=limited
        )
        assert r.status_code == 403 and r.json()["code"] == "forbidden", r.text

        # Step 1 as the issue did it (no namespaces named): the user gets the key's reach, no more.
        r = await http.post(f"{base}/v1/users", json={"email": address, "password": PASSWORD}, headers=limited)
        assert r.status_code == 201, r.text
        assert r.json()["namespaces"] == ["default"]
        user = User(uuid.UUID(r.json()["id"]), address, tenant_a)

        # Step 2, the real sign-in: the consent page offers only what the user may share.
        client = await register(http, oauth_server)
        verifier, challenge = pkce()
        url = authorization_url(oauth_server, client["client_id"], challenge)
        browser = Browser(http, user)
        page = await browser.sign_in(url)
        assert page.status_code == 200 and 'value="default"' in page.text
        assert 'value="vault"' not in page.text

        # Step 3, consenting to `vault` anyway (a hand-made form post) is refused.
        r = await browser.consent(page, url, namespaces=["vault"])
        assert r.status_code == 400 and "No namespace named &#x27;vault&#x27;" in r.text
        r = await browser.consent(page, url, namespaces=["default", "vault"])
        assert r.status_code == 400

        # What it can get is `default`, and over MCP (real HTTP) `vault` stays out of reach.
        code = redirect_params(await browser.consent(page, url, namespaces=["default"]))["code"]
        tokens = (await exchange(http, oauth_server, client["client_id"], code, verifier)).json()
        assert _claims(tokens["access_token"])["ns"] == ["default"]
        async with mcp_session(base, tokens["access_token"]) as s:
            assert (await call(s, "memory_status"))["namespaces"] == ["default"]
            assert "not allowed" in await fails(s, "memory_store", content="Ana likes tea", namespace="vault")
            assert "not allowed" in await fails(s, "memory_search", query="tea", namespace="vault")


class TestListingAndEnding:
    async def test_users_and_grants_beyond_the_key_are_out_of_its_reach(
        self, oauth_server: Server, http: httpx.AsyncClient, tenant_a: Tenant, limited: dict[str, str]
    ) -> None:
        base = oauth_server.base
        # The tenant's unrestricted admin made a user who shared `vault` with a client.
        outsider = await make_user(oauth_server.api, tenant_a)
        granted = await obtain_tokens(http, oauth_server, outsider, namespaces=["vault"])
        # And the limited key made one of its own, who shared `default`.
        r = await http.post(
            f"{base}/v1/users",
            json={"email": f"in-{uuid.uuid4().hex[:8]}@example.com", "password": PASSWORD},
            headers=limited,
        )
        insider = User(uuid.UUID(r.json()["id"]), r.json()["email"], tenant_a)
        own = await obtain_tokens(http, oauth_server, insider, namespaces=["default"])

        listed = (await http.get(f"{base}/v1/users", headers=limited)).json()["data"]
        assert [u["email"] for u in listed] == [insider.email]
        account = (await http.get(f"{base}/v1/account", headers=limited)).json()
        assert account["users"] == 1 and [g["user_email"] for g in account["grants"]] == [insider.email]
        everything = (await http.get(f"{base}/v1/account", headers=tenant_a.headers)).json()
        outsider_grant = next(g["id"] for g in everything["grants"] if g["user_email"] == outsider.email)

        r = await http.post(f"{base}/v1/users/{outsider.id}/disable", headers=limited)
        assert r.status_code == 403, r.text
        r = await http.delete(f"{base}/v1/account/grants/{outsider_grant}", headers=limited)
        assert r.status_code == 403, r.text
        # Refused means nothing happened: the outsider's grant still works, the user is enabled.
        assert (await mcp_ping(http, oauth_server, granted.access_token)).status_code == 200
        users = (await http.get(f"{base}/v1/users", headers=tenant_a.headers)).json()["data"]
        assert next(u for u in users if u["email"] == outsider.email)["disabled_at"] is None

        # Within its reach it may end things.
        own_grant = account["grants"][0]["id"]
        assert (await http.delete(f"{base}/v1/account/grants/{own_grant}", headers=limited)).status_code == 200
        assert (await mcp_ping(http, oauth_server, own.access_token)).status_code == 401
        assert (await http.post(f"{base}/v1/users/{insider.id}/disable", headers=limited)).status_code == 200

    async def test_keys_follow_the_same_rule(
        self, oauth_server: Server, http: httpx.AsyncClient, tenant_a: Tenant, limited: dict[str, str]
    ) -> None:
        base = oauth_server.base
        r = await http.post(f"{base}/v1/keys", json={"scopes": ["admin"], "namespaces": ["vault"]}, headers=limited)
        assert r.status_code == 403
        r = await http.post(f"{base}/v1/keys", json={"scopes": ["read"]}, headers=limited)
        assert r.status_code == 403  # no namespaces: every namespace of the tenant
        keys = (await http.get(f"{base}/v1/keys", headers=tenant_a.headers)).json()["data"]
        wide = next(k for k in keys if k["namespaces"] is None)
        assert (await http.delete(f"{base}/v1/keys/{wide['id']}", headers=limited)).status_code == 403
