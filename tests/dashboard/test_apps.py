"""The connected apps page: a member's OAuth grant (made through the real flow against the served
app) is listed with its client, redirect host, member and last use, and revoking it there ends the
client's tokens; only admins of the grant's own organisation can."""

from __future__ import annotations

import uuid

import httpx
import pytest

from memvault.api import NamespaceAPI
from memvault.principal import Principal
from tests.conftest import Tenant
from tests.dashboard.conftest import Browser, add_member
from tests.oauth import conftest as oauth
from tests.oauth.conftest import Server, Tokens, User, make_user, mcp_ping, obtain_tokens, refresh

# The OAuth tests' served app (the flow needs a real address) and their plain HTTP client.
oauth_server = oauth.oauth_server
http = oauth.http


async def connect(http: httpx.AsyncClient, server: Server, tenant: Tenant) -> tuple[User, Tokens, uuid.UUID]:
    """A member of ``tenant`` signs in to a new MCP client: the user, its tokens and the grant's id."""
    user = await make_user(server.api, tenant)
    tokens = await obtain_tokens(http, server, user)
    grants = (await server.api.list_grants(tenant.principal)).data
    [grant] = [g for g in grants if g.client_id == tokens.client_id]
    return user, tokens, grant.id


class TestListAndRevoke:
    async def test_a_grant_is_listed_and_revoking_it_signs_the_app_out(
        self, signed_in: Browser, http: httpx.AsyncClient, oauth_server: Server, tenant_a: Tenant
    ) -> None:
        user, tokens, gid = await connect(http, oauth_server, tenant_a)
        assert (await mcp_ping(http, oauth_server, tokens.access_token)).status_code == 200
        page = await signed_in.get("/dashboard/apps")
        assert page.status_code == 200 and 'id="apps"' in page.text
        row = page.text.split(f'id="app-{gid}"', 1)[1].split("</tr>", 1)[0]
        assert "Test Client" in row and "127.0.0.1:33418" in row and user.email in row
        assert "read, write" in row and tenant_a.namespace in row
        assert "not yet" not in row  # the MCP request above was its last use
        assert f'id="revoke-app-{gid}"' in row

        r = await signed_in.post(f"/dashboard/apps/{gid}/revoke")
        assert r.status_code == 303 and r.headers["location"] == "/dashboard/apps?done=revoked"
        assert (await mcp_ping(http, oauth_server, tokens.access_token)).status_code == 401
        again = await refresh(http, oauth_server, tokens.client_id, tokens.refresh_token)
        assert again.status_code == 400 and again.json()["error"] == "invalid_grant"

        after = await signed_in.get(r.headers["location"])
        assert f'id="app-{gid}"' not in after.text and 'id="notice"' in after.text
        everything = await signed_in.get("/dashboard/apps?show=all")
        row = everything.text.split(f'id="app-{gid}"', 1)[1].split("</tr>", 1)[0]
        assert "revoked" in row and f'id="revoke-app-{gid}"' not in row

    async def test_the_facade_pages_grants_and_keeps_a_limited_admin_within_its_namespaces(
        self, http: httpx.AsyncClient, oauth_server: Server, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        _, _, first = await connect(http, oauth_server, tenant_a)
        _, _, second = await connect(http, oauth_server, tenant_a)
        page = await api.list_grants(tenant_a.principal, limit=1)
        assert [g.id for g in page.data] == [second] and page.next_cursor
        rest = await api.list_grants(tenant_a.principal, limit=1, cursor=page.next_cursor)
        assert [g.id for g in rest.data] == [first] and rest.next_cursor is None
        elsewhere = Principal(
            tenant_id=tenant_a.id, scopes=frozenset({"admin"}), subject="t", namespaces=frozenset({"x"})
        )
        assert (await api.list_grants(elsewhere)).data == []


class TestWhoMay:
    @pytest.mark.parametrize("role", ["member", "viewer"])
    async def test_others_see_no_page_and_cannot_revoke(
        self,
        browser: Browser,
        http: httpx.AsyncClient,
        oauth_server: Server,
        api: NamespaceAPI,
        tenant_a: Tenant,
        role: str,
    ) -> None:
        _, tokens, gid = await connect(http, oauth_server, tenant_a)
        await browser.sign_in(await add_member(api, tenant_a, role))
        assert 'id="nav-apps"' not in (await browser.get("/dashboard")).text
        page = await browser.get("/dashboard/apps")
        assert page.status_code == 403 and f"revoke-app-{gid}" not in page.text
        await browser.get("/dashboard")
        assert (await browser.post(f"/dashboard/apps/{gid}/revoke")).status_code == 403
        assert (await mcp_ping(http, oauth_server, tokens.access_token)).status_code == 200

    async def test_another_organisations_grant_is_not_found(
        self,
        browser: Browser,
        http: httpx.AsyncClient,
        oauth_server: Server,
        api: NamespaceAPI,
        tenant_a: Tenant,
        tenant_b: Tenant,
    ) -> None:
        _, tokens, gid = await connect(http, oauth_server, tenant_a)
        await browser.sign_in(await add_member(api, tenant_b, "owner"))
        assert str(gid) not in (await browser.get("/dashboard/apps")).text
        r = await browser.post(f"/dashboard/apps/{gid}/revoke")
        assert r.status_code == 404
        assert (await mcp_ping(http, oauth_server, tokens.access_token)).status_code == 200

    async def test_a_form_without_its_token_is_refused(
        self, signed_in: Browser, http: httpx.AsyncClient, oauth_server: Server, tenant_a: Tenant
    ) -> None:
        _, tokens, gid = await connect(http, oauth_server, tenant_a)
        await signed_in.get("/dashboard/apps")
        r = await signed_in.post(f"/dashboard/apps/{gid}/revoke", csrf="")
        assert r.status_code == 403 and "csrf_failed" in r.text
        assert (await mcp_ping(http, oauth_server, tokens.access_token)).status_code == 200
