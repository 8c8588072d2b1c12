"""The whole OAuth flow as an MCP client given only the URL runs it: the `mcp` SDK's
OAuthClientProvider against uvicorn on 127.0.0.1, with the sign-in and consent forms filled in
over HTTP as a browser would. Then refresh with rotation, reuse detection and revocation."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl

from tests.conftest import Tenant
from tests.mcp.conftest import call, mcp_session
from tests.oauth.conftest import REDIRECT, Browser, Server, User, mcp_ping, refresh


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class HeadlessUser:
    """The provider's redirect and callback handlers: the browser signs in and consents, and the
    redirect it would follow to the client's loopback listener is handed back as the callback."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        self.urls: list[str] = []
        self.location: str | None = None

    async def redirect(self, url: str) -> None:
        self.urls.append(url)
        self.location = (await self.browser.authorize(url)).headers["location"]

    async def callback(self) -> AuthorizationCodeResult:
        assert self.location is not None
        q = {k: v[0] for k, v in parse_qs(urlsplit(self.location).query).items()}
        return AuthorizationCodeResult(code=q["code"], state=q.get("state"), iss=q.get("iss"))


def provider(server: Server, storage: MemoryStorage, user: HeadlessUser, url: str | None = None) -> OAuthClientProvider:
    return OAuthClientProvider(
        server_url=url or server.mcp,
        client_metadata=OAuthClientMetadata(
            client_name="SDK test client",
            redirect_uris=[AnyUrl(REDIRECT)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=user.redirect,
        callback_handler=user.callback,
    )


class TestDiscovery:
    async def test_a_bare_401_points_to_the_metadata(self, oauth_server: Server, http: httpx.AsyncClient) -> None:
        r = await http.post(oauth_server.mcp, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert r.status_code == 401
        challenge = r.headers["www-authenticate"]
        assert challenge.startswith("Bearer ")
        assert f'resource_metadata="{oauth_server.base}/.well-known/oauth-protected-resource/mcp"' in challenge
        assert 'scope="read write"' in challenge

    async def test_every_profile_url_points_to_the_metadata(
        self, oauth_server: Server, http: httpx.AsyncClient
    ) -> None:
        for path in ("/mcp/core", "/mcp/extended", "/mcp?profile=extended"):
            r = await http.post(oauth_server.base + path, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert r.status_code == 401, path
            metadata = f"{oauth_server.base}/.well-known/oauth-protected-resource/mcp"
            assert f'resource_metadata="{metadata}"' in r.headers["www-authenticate"], path

    async def test_protected_resource_metadata(self, oauth_server: Server, http: httpx.AsyncClient) -> None:
        for path in (
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource",
            # RFC 9728's path-based URLs of the profile endpoints: the same resource, named /mcp.
            "/.well-known/oauth-protected-resource/mcp/core",
            "/.well-known/oauth-protected-resource/mcp/extended",
        ):
            meta = (await http.get(oauth_server.base + path)).json()
            assert meta["resource"] == oauth_server.mcp
            assert meta["authorization_servers"] == [oauth_server.base]
            assert meta["scopes_supported"] == ["read", "write", "act_as"]
            assert meta["bearer_methods_supported"] == ["header"]

    async def test_authorization_server_metadata(self, oauth_server: Server, http: httpx.AsyncClient) -> None:
        r = await http.get(f"{oauth_server.base}/.well-known/oauth-authorization-server")
        meta = r.json()
        assert meta["issuer"] == oauth_server.base  # exactly: no trailing slash
        assert meta["authorization_endpoint"] == f"{oauth_server.base}/oauth/authorize"
        assert meta["token_endpoint"] == f"{oauth_server.base}/oauth/token"
        assert meta["registration_endpoint"] == f"{oauth_server.base}/oauth/register"
        assert meta["revocation_endpoint"] == f"{oauth_server.base}/oauth/revoke"
        assert meta["code_challenge_methods_supported"] == ["S256"]
        assert "none" in meta["token_endpoint_auth_methods_supported"]
        assert meta["client_id_metadata_document_supported"] is True
        assert meta["authorization_response_iss_parameter_supported"] is True
        assert r.headers["access-control-allow-origin"] == "*"

    async def test_jwks_publishes_the_signing_key(self, oauth_server: Server, http: httpx.AsyncClient) -> None:
        keys = (await http.get(f"{oauth_server.base}/oauth/jwks.json")).json()["keys"]
        assert keys and all(k["kty"] == "EC" and k["alg"] == "ES256" and k["kid"] for k in keys)
        assert all("d" not in k for k in keys)  # public halves only


class TestSdkFlow:
    async def test_url_only_client_signs_in_calls_tools_and_refreshes(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User, tenant_a: Tenant
    ) -> None:
        storage, person = MemoryStorage(), HeadlessUser(Browser(http, user_a))
        auth = provider(oauth_server, storage, person)
        async with (
            create_mcp_http_client(auth=auth) as client,
            streamable_http_client(oauth_server.mcp, http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            status = await call(session, "memory_status")
            assert status["tenant_id"] == str(tenant_a.id)
            assert status["namespaces"] == ["default"] and set(status["scopes"]) == {"read", "write"}
            stored = await call(session, "memory_store", content="Ana's favourite editor is Helix")
            assert stored["namespace"] == "default"

            # The sign-in asked for PKCE S256 and named this server's MCP URL as the resource.
            q = parse_qs(urlsplit(person.urls[0]).query)
            assert q["code_challenge_method"] == ["S256"] and q["resource"] == [oauth_server.mcp]
            assert storage.client is not None and storage.client.client_secret is None
            first = storage.tokens
            assert first is not None and first.refresh_token and first.expires_in == 900

            # The access token "expires": the provider refreshes, and the refresh token rotates.
            auth.context.token_expiry_time = 1.0  # long past (0 would mean "no expiry")
            found = await call(session, "memory_search", query="which editor does Ana use?")
            assert found["results"][0]["id"] == stored["id"]
            second = storage.tokens
            assert second is not None and second.refresh_token != first.refresh_token
            assert second.access_token != first.access_token
            assert len(person.urls) == 1  # no second sign-in

        # The memory is the tenant's: the admin key sees it over REST.
        async with mcp_session(oauth_server.base, tenant_a.key) as s:
            assert (await call(s, "memory_get", memory_id=stored["id"]))["content"] == stored["content"]

        # Reusing the rotated refresh token revokes the whole family: the live access token dies too.
        assert (await mcp_ping(http, oauth_server, second.access_token)).status_code == 200
        reuse = await refresh(http, oauth_server, storage.client.client_id, first.refresh_token)
        assert reuse.status_code == 400 and reuse.json()["error"] == "invalid_grant"
        assert "revoked" in reuse.json()["error_description"]
        r = await mcp_ping(http, oauth_server, second.access_token)
        assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]
        assert (await refresh(http, oauth_server, storage.client.client_id, second.refresh_token)).status_code == 400

    async def test_a_client_given_a_profile_url_signs_in_for_the_same_resource(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User, tenant_a: Tenant
    ) -> None:
        for path, tool in (("/mcp/core", "memory_store"), ("/mcp/extended?profile=extended", "memory_account")):
            storage, person = MemoryStorage(), HeadlessUser(Browser(http, user_a))
            url = oauth_server.base + path
            async with (
                create_mcp_http_client(auth=provider(oauth_server, storage, person, url)) as client,
                streamable_http_client(url, http_client=client) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                assert tool in {t.name for t in (await session.list_tools()).tools}
                assert (await call(session, "memory_status"))["tenant_id"] == str(tenant_a.id)
            # One resource for every profile: the token is for /mcp, and serves the others too.
            assert parse_qs(urlsplit(person.urls[0]).query)["resource"] == [oauth_server.mcp]
            assert storage.tokens is not None
            async with mcp_session(oauth_server.base, storage.tokens.access_token, "/mcp/core") as s:
                assert (await call(s, "memory_status"))["tenant_id"] == str(tenant_a.id)

    async def test_revocation_ends_access_at_once(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User
    ) -> None:
        storage, person = MemoryStorage(), HeadlessUser(Browser(http, user_a))
        async with (
            create_mcp_http_client(auth=provider(oauth_server, storage, person)) as client,
            streamable_http_client(oauth_server.mcp, http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await call(session, "memory_status")
        assert storage.tokens is not None and storage.client is not None
        access, refresh_token = storage.tokens.access_token, storage.tokens.refresh_token
        r = await http.post(
            f"{oauth_server.base}/oauth/revoke",
            data={"token": refresh_token, "token_type_hint": "refresh_token", "client_id": storage.client.client_id},
        )
        assert r.status_code == 200
        assert (await mcp_ping(http, oauth_server, access)).status_code == 401
        assert (await refresh(http, oauth_server, storage.client.client_id, refresh_token or "")).status_code == 400
        # Revoking again, or revoking nonsense, answers the same.
        again = await http.post(f"{oauth_server.base}/oauth/revoke", data={"token": refresh_token})
        assert again.status_code == 200
        junk = await http.post(f"{oauth_server.base}/oauth/revoke", data={"token": "mvr_nothing"})
        assert junk.status_code == 200

    async def test_api_key_bearer_still_works_alongside(
        self, oauth_server: Server, http: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        async with mcp_session(oauth_server.base, tenant_a.key) as s:
            assert (await call(s, "memory_status"))["tenant_id"] == str(tenant_a.id)
        assert (await mcp_ping(http, oauth_server, tenant_a.key)).status_code == 200
