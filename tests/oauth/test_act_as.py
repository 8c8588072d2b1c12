"""`act_as` through the real OAuth flow: an owner or admin may grant it to a client, which then
reads and writes another member's memories by naming them; a member asking for it is granted
without it and stays bound to themselves; a client asking for nothing never gets it."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from memvault.members.roles import Role
from memvault.oauth.schemas import UserIn
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
    pkce,
    redirect_params,
    refresh,
    register,
)

OFFERED = '<input type="checkbox" name="grant_scope" value="act_as"'
ACT_AS_TEXT = "Act for other users of this organisation: read and write any member&#x27;s memories by naming them"


async def member_with_role(server: Server, tenant: Tenant, role: Role) -> User:
    user = await make_user(server.api, tenant)
    if role != "member":
        body = UserIn(email=f"{role}-{user.email}", password=PASSWORD, role=role)
        out = await server.api.create_user(tenant.principal, body)
        return User(out.id, body.email, tenant)
    return user


async def sign_in_asking(
    http: httpx.AsyncClient, server: Server, user: User, scope: str | None, *, tick: list[str]
) -> tuple[httpx.Response, dict[str, Any]]:
    """The consent page for a request naming ``scope``, and the tokens after ticking ``tick``
    (posted as is: a forged form may tick what the page did not offer)."""
    client = await register(http, server)
    verifier, challenge = pkce()
    url = authorization_url(server, client["client_id"], challenge, scope=scope)
    browser = Browser(http, user)
    page = await browser.sign_in(url)
    code = redirect_params(await browser.consent(page, url, scopes=tick))["code"]
    r = await exchange(http, server, client["client_id"], code, verifier)
    assert r.status_code == 200, r.text
    return page, r.json()


@pytest.fixture
async def bob(oauth_server: Server, tenant_a: Tenant) -> User:
    return await make_user(oauth_server.api, tenant_a)


class TestActAs:
    @pytest.mark.parametrize("role", ["owner", "admin"])
    async def test_an_owner_or_admin_grant_reads_and_writes_another_members_memories(
        self, oauth_server: Server, http: httpx.AsyncClient, tenant_a: Tenant, bob: User, role: Role
    ) -> None:
        boss = await member_with_role(oauth_server, tenant_a, role)
        page, tokens = await sign_in_asking(
            http, oauth_server, boss, "read write act_as", tick=["read", "write", "act_as"]
        )
        # Offered, plainly, but the owner ticks it: Allow alone does not give it.
        assert f"{OFFERED}>" in page.text and ACT_AS_TEXT in page.text
        assert tokens["scope"] == "read write act_as"
        bob_id = str(bob.id)
        _, bobs = await sign_in_asking(http, oauth_server, bob, "read write", tick=["read", "write"])

        async with mcp_session(oauth_server.base, bobs["access_token"]) as s:
            await call(s, "memory_store", content="Bob keeps his spare key under the blue pot")

        async with mcp_session(oauth_server.base, tokens["access_token"]) as s:
            found = await call(s, "memory_search", query="spare key", user_id=bob_id)
            assert "Bob keeps his spare key under the blue pot" in [r["content"] for r in found["results"]]
            stored = await call(s, "memory_store", content="Bob's badge number is 4471", user_id=bob_id)
            assert stored["user_id"] == bob_id and stored["scope"] == "user"
            # Without a user_id the grant still acts as the person who signed in.
            own = await call(s, "memory_store", content="The boss parks on level 3")
            assert own["user_id"] == str(boss.id)

        # What the grant wrote for bob is bob's: he reads it through his own grant.
        async with mcp_session(oauth_server.base, bobs["access_token"]) as s:
            mine = [r["content"] for r in (await call(s, "memory_search", query="badge number"))["results"]]
            assert "Bob's badge number is 4471" in mine

    async def test_a_member_asking_for_it_is_granted_without_it(
        self, oauth_server: Server, http: httpx.AsyncClient, tenant_a: Tenant, bob: User
    ) -> None:
        member = await make_user(oauth_server.api, tenant_a)
        page, tokens = await sign_in_asking(
            http, oauth_server, member, "read write act_as", tick=["read", "write", "act_as"]
        )
        assert OFFERED not in page.text and ACT_AS_TEXT not in page.text
        assert tokens["scope"] == "read write"
        async with mcp_session(oauth_server.base, tokens["access_token"]) as s:
            for tool, args in (
                ("memory_search", {"query": "anything", "user_id": str(bob.id)}),
                ("memory_store", {"content": "Bob likes tea", "user_id": str(bob.id)}),
            ):
                text = await fails(s, tool, **args)
                assert text.startswith("user_mismatch"), (tool, text)

    async def test_a_request_naming_no_scope_never_gets_it(
        self, oauth_server: Server, http: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        owner = await member_with_role(oauth_server, tenant_a, "owner")
        page, tokens = await sign_in_asking(http, oauth_server, owner, None, tick=["read", "write", "act_as"])
        assert OFFERED not in page.text
        assert tokens["scope"] == "read write"

    async def test_allow_as_the_page_comes_does_not_grant_it(
        self, oauth_server: Server, http: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        owner = await member_with_role(oauth_server, tenant_a, "owner")
        client = await register(http, oauth_server)
        verifier, challenge = pkce()
        url = authorization_url(oauth_server, client["client_id"], challenge, scope="read write act_as")
        browser = Browser(http, owner)
        page = await browser.sign_in(url)
        ticked = re.findall(r'name="grant_scope" value="([^"]+)" checked', page.text)
        assert ticked == ["read", "write"]
        code = redirect_params(await browser.consent(page, url, scopes=ticked))["code"]
        r = await exchange(http, oauth_server, client["client_id"], code, verifier)
        assert r.json()["scope"] == "read write"

    async def test_it_cannot_be_granted_alone(
        self, oauth_server: Server, http: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        owner = await member_with_role(oauth_server, tenant_a, "owner")
        client = await register(http, oauth_server)
        _, challenge = pkce()
        url = authorization_url(oauth_server, client["client_id"], challenge, scope="read act_as")
        browser = Browser(http, owner)
        refused = await browser.consent(await browser.sign_in(url), url, scopes=["act_as"])
        assert refused.status_code == 400 and "Choose at least one permission" in refused.text

    async def test_demoting_the_admin_ends_the_grant(
        self, oauth_server: Server, http: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        admin = await member_with_role(oauth_server, tenant_a, "admin")
        client = await register(http, oauth_server)
        verifier, challenge = pkce()
        url = authorization_url(oauth_server, client["client_id"], challenge, scope="read write act_as")
        code = redirect_params(await Browser(http, admin).authorize(url, scopes=["read", "write", "act_as"]))["code"]
        tokens = (await exchange(http, oauth_server, client["client_id"], code, verifier)).json()
        assert tokens["scope"] == "read write act_as"
        patched = await http.patch(
            f"{oauth_server.base}/v1/members/{admin.id}", json={"role": "member"}, headers=tenant_a.headers
        )
        assert patched.status_code == 200, patched.text
        assert (await mcp_ping(http, oauth_server, tokens["access_token"])).status_code == 401
        again = await refresh(http, oauth_server, client["client_id"], tokens["refresh_token"])
        assert again.status_code == 400 and again.json()["error"] == "invalid_grant"

    async def test_the_metadata_lists_it(self, oauth_server: Server, http: httpx.AsyncClient) -> None:
        for path in ("/.well-known/oauth-authorization-server", "/.well-known/oauth-protected-resource/mcp"):
            listed = (await http.get(f"{oauth_server.base}{path}")).json()["scopes_supported"]
            assert listed == ["read", "write", "act_as"], path
