"""Everything the authorization server and /mcp must refuse, over real HTTP."""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import replace

import httpx
import psycopg
import pytest
from joserfc import jwt
from joserfc.jwk import ECKey

from memvault.db.urls import DatabaseUrls
from memvault.oauth import clients
from memvault.oauth.errors import UnknownClient
from tests.conftest import Tenant
from tests.oauth.conftest import (
    REDIRECT,
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
    refresh,
    register,
)


async def signed(pg_urls: DatabaseUrls, claims: dict[str, object], *, typ: str = "at+jwt") -> str:
    """A token signed with the server's own current key, as a forger holding it (or another
    resource's token from the same server) would present."""
    conninfo = pg_urls.owner.render_as_string(hide_password=False).replace("+psycopg", "")
    async with await psycopg.AsyncConnection.connect(conninfo) as conn:
        cur = await conn.execute(
            "SELECT kid, private_pem FROM oauth_signing_keys WHERE retired_at IS NULL ORDER BY created_at DESC"
        )
        kid, pem = (await cur.fetchone()) or (None, None)
    key = ECKey.import_key(pem, {"kid": kid})
    return jwt.encode({"alg": "ES256", "kid": kid, "typ": typ}, claims, key)


def _peek(token: str) -> dict[str, object]:
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


class TestTokenEndpoint:
    async def test_wrong_pkce_verifier_is_refused_and_spends_the_code(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User
    ) -> None:
        client = await register(http, oauth_server)
        verifier, challenge = pkce()
        r = await Browser(http, user_a).authorize(authorization_url(oauth_server, client["client_id"], challenge))
        code = redirect_params(r)["code"]
        wrong = await exchange(http, oauth_server, client["client_id"], code, pkce()[0])
        assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
        assert "PKCE" in wrong.json()["error_description"]
        assert wrong.headers["cache-control"] == "no-store"
        right = await exchange(http, oauth_server, client["client_id"], code, verifier)
        assert right.status_code == 400 and right.json()["error"] == "invalid_grant"

    async def test_code_reuse_revokes_what_it_granted(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User
    ) -> None:
        client = await register(http, oauth_server)
        verifier, challenge = pkce()
        r = await Browser(http, user_a).authorize(authorization_url(oauth_server, client["client_id"], challenge))
        code = redirect_params(r)["code"]
        first = await exchange(http, oauth_server, client["client_id"], code, verifier)
        assert first.status_code == 200
        assert (await mcp_ping(http, oauth_server, first.json()["access_token"])).status_code == 200
        again = await exchange(http, oauth_server, client["client_id"], code, verifier)
        assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
        assert (await mcp_ping(http, oauth_server, first.json()["access_token"])).status_code == 401

    async def test_redirect_uri_must_match_at_the_token_endpoint(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User
    ) -> None:
        client = await register(http, oauth_server)
        verifier, challenge = pkce()
        r = await Browser(http, user_a).authorize(authorization_url(oauth_server, client["client_id"], challenge))
        code = redirect_params(r)["code"]
        other = await exchange(
            http, oauth_server, client["client_id"], code, verifier, redirect_uri="http://127.0.0.1:1/other"
        )
        assert other.status_code == 400 and other.json()["error"] == "invalid_grant"

    async def test_another_clients_code_and_refresh_token_are_refused(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User
    ) -> None:
        tokens = await obtain_tokens(http, oauth_server, user_a)
        thief = await register(http, oauth_server)
        r = await refresh(http, oauth_server, thief["client_id"], tokens.refresh_token)
        assert r.status_code == 400 and r.json()["error"] == "invalid_grant"

    async def test_token_for_another_resource_is_refused(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User
    ) -> None:
        tokens = await obtain_tokens(http, oauth_server, user_a)
        r = await http.post(
            f"{oauth_server.base}/oauth/token",
            data={
                "grant_type": "refresh_token",
                "refresh_token": tokens.refresh_token,
                "client_id": tokens.client_id,
                "resource": "https://elsewhere.example/mcp",
            },
        )
        assert r.status_code == 400 and r.json()["error"] == "invalid_target"

    async def test_unknown_grant_type_and_missing_client(self, oauth_server: Server, http: httpx.AsyncClient) -> None:
        r = await http.post(f"{oauth_server.base}/oauth/token", data={"grant_type": "password", "client_id": "x"})
        assert r.status_code == 400 and r.json()["error"] == "unsupported_grant_type"
        r = await http.post(f"{oauth_server.base}/oauth/token", data={"grant_type": "authorization_code"})
        assert r.status_code == 401 and r.json()["error"] == "invalid_client"


class TestAuthorizationEndpoint:
    async def test_missing_resource_is_sent_back_as_invalid_target(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User
    ) -> None:
        # A client someone let in before: its redirect URI is trusted with errors.
        client = {"client_id": (await obtain_tokens(http, oauth_server, user_a)).client_id}
        url = authorization_url(oauth_server, client["client_id"], pkce()[1], resource=None, state="s1")
        q = redirect_params(await http.get(url))
        assert q["error"] == "invalid_target" and q["state"] == "s1" and q["iss"] == oauth_server.base
        other = authorization_url(oauth_server, client["client_id"], pkce()[1], resource="https://x.example/mcp")
        assert redirect_params(await http.get(other))["error"] == "invalid_target"

    async def test_pkce_is_required_and_only_s256(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User
    ) -> None:
        client = {"client_id": (await obtain_tokens(http, oauth_server, user_a)).client_id}
        cases: list[dict[str, str | None]] = [
            {"code_challenge": None},
            {"code_challenge_method": "plain"},
            {"code_challenge_method": None},
        ]
        for overrides in cases:
            url = authorization_url(oauth_server, client["client_id"], pkce()[1], **overrides)
            assert redirect_params(await http.get(url))["error"] == "invalid_request"

    async def test_unregistered_redirect_uri_is_never_redirected_to(
        self, oauth_server: Server, http: httpx.AsyncClient
    ) -> None:
        client = await register(http, oauth_server)
        for uri in ("https://evil.example/cb", "http://127.0.0.1:33418/elsewhere", "http://localhost:33418/callback"):
            r = await http.get(authorization_url(oauth_server, client["client_id"], pkce()[1], redirect_uri=uri))
            assert r.status_code == 400 and "location" not in r.headers
            assert "not valid" in r.text
        # A loopback redirect URI may use any port (RFC 8252 §7.3).
        r = await http.get(
            authorization_url(
                oauth_server, client["client_id"], pkce()[1], redirect_uri="http://127.0.0.1:5999/callback"
            )
        )
        assert r.status_code == 200 and "Sign in" in r.text

    async def test_unknown_client_gets_an_error_page(self, oauth_server: Server, http: httpx.AsyncClient) -> None:
        r = await http.get(authorization_url(oauth_server, "mvc_nope", pkce()[1]))
        assert r.status_code == 400 and "location" not in r.headers
        assert r.headers["x-frame-options"] == "DENY"

    async def test_wrong_password_and_disabled_user_cannot_sign_in(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User, tenant_a: Tenant
    ) -> None:
        client = await register(http, oauth_server)
        url = authorization_url(oauth_server, client["client_id"], pkce()[1])
        r = await Browser(http, user_a).sign_in(url, password="not the password")
        assert r.status_code == 401 and 'role="alert"' in r.text
        await oauth_server.api.disable_user(tenant_a.principal, user_a.id)
        r = await Browser(http, user_a).sign_in(url)
        assert r.status_code == 401 and "ticket" not in r.text

    async def test_user_cannot_grant_another_tenants_namespace(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User, tenant_b: Tenant, client: httpx.AsyncClient
    ) -> None:
        only_b = f"b-private-{uuid.uuid4().hex[:6]}"
        r = await client.post("/v1/namespaces", json={"name": only_b}, headers=tenant_b.headers)
        assert r.status_code == 201
        registered = await register(http, oauth_server)
        url = authorization_url(oauth_server, registered["client_id"], pkce()[1])
        browser = Browser(http, user_a)
        page = await browser.sign_in(url)
        assert only_b not in page.text  # the consent page lists only the user's tenant's namespaces
        r = await browser.consent(page, url, namespaces=[only_b])
        assert r.status_code == 400 and "location" not in r.headers
        assert "No namespace named" in r.text

    async def test_declining_sends_access_denied(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User
    ) -> None:
        registered = await register(http, oauth_server)
        url = authorization_url(oauth_server, registered["client_id"], pkce()[1], state="keep-me")
        browser = Browser(http, user_a)
        q = redirect_params(await browser.consent(await browser.sign_in(url), url, decision="deny"))
        assert q == {
            "error": "access_denied",
            "error_description": "The user declined.",
            "state": "keep-me",
            "iss": oauth_server.base,
        }

    async def test_consent_limits_scopes_and_namespaces(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User, tenant_a: Tenant, client: httpx.AsyncClient
    ) -> None:
        await client.post("/v1/namespaces", json={"name": "work"}, headers=tenant_a.headers)
        registered = await register(http, oauth_server)
        verifier, challenge = pkce()
        url = authorization_url(oauth_server, registered["client_id"], challenge)
        browser = Browser(http, user_a)
        r = await browser.consent(await browser.sign_in(url), url, namespaces=["work"], scopes=["read"])
        tokens = await exchange(http, oauth_server, registered["client_id"], redirect_params(r)["code"], verifier)
        body = tokens.json()
        assert body["scope"] == "read"
        claims = _peek(body["access_token"])
        assert claims["ns"] == ["work"] and claims["aud"] == oauth_server.mcp and claims["iss"] == oauth_server.base
        principal = await oauth_server.api.authenticate_access_token(body["access_token"])
        assert principal.tenant_id == tenant_a.id and principal.scopes == {"read"}
        assert principal.namespaces == {"work"} and principal.default_namespace == "work"


class TestAccessTokens:
    async def test_expired_tampered_foreign_audience_and_wrong_type(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User, pg_urls: DatabaseUrls
    ) -> None:
        good = await obtain_tokens(http, oauth_server, user_a)
        assert (await mcp_ping(http, oauth_server, good.access_token)).status_code == 200
        base = _peek(good.access_token)

        expired = await signed(pg_urls, {**base, "exp": int(time.time()) - 3600})
        other_audience = await signed(pg_urls, {**base, "aud": "https://other.example/mcp"})
        other_issuer = await signed(pg_urls, {**base, "iss": "https://other.example"})
        login_ticket = await signed(pg_urls, base, typ="memvault-login+jwt")
        head, payload, sig = good.access_token.split(".")
        tampered_sig = f"{head}.{payload}.{sig[:-4]}{'AAAA' if not sig.endswith('AAAA') else 'BBBB'}"
        forged_payload = f"{head}.{_b64({**base, 'ns': ['default', 'admin-stuff']})}.{sig}"
        stranger = ECKey.generate_key("P-256", auto_kid=True)
        foreign_key = jwt.encode({"alg": "ES256", "kid": stranger.kid, "typ": "at+jwt"}, base, stranger)

        for token, why in (
            (expired, "expired"),
            (other_audience, "not issued for this resource"),
            (other_issuer, "not issued for this resource"),
            (login_ticket, "not valid"),
            (tampered_sig, "signature"),
            (forged_payload, "signature"),
            (foreign_key, "not valid"),
            ("not-a-jwt", "not valid"),
        ):
            r = await mcp_ping(http, oauth_server, token)
            assert r.status_code == 401, why
            assert r.json()["code"] == "invalid_token" and why in r.json()["detail"], (why, r.json())
            assert 'error="invalid_token"' in r.headers["www-authenticate"]
            assert "resource_metadata=" in r.headers["www-authenticate"]

    async def test_disabling_a_user_ends_their_tokens(
        self, oauth_server: Server, http: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        user = await make_user(oauth_server.api, tenant_a)
        tokens = await obtain_tokens(http, oauth_server, user)
        assert (await mcp_ping(http, oauth_server, tokens.access_token)).status_code == 200
        await oauth_server.api.disable_user(tenant_a.principal, user.id)
        assert (await mcp_ping(http, oauth_server, tokens.access_token)).status_code == 401
        assert (await refresh(http, oauth_server, tokens.client_id, tokens.refresh_token)).status_code == 400

    async def test_a_new_password_ends_the_tokens_the_old_one_signed_in(
        self, oauth_server: Server, http: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        # A password is reset because it was lost or leaked: whoever signed an MCP client in with it
        # must sign in again, as the dashboard's sessions must.
        user = await make_user(oauth_server.api, tenant_a)
        tokens = await obtain_tokens(http, oauth_server, user)
        assert (await mcp_ping(http, oauth_server, tokens.access_token)).status_code == 200
        await oauth_server.api.set_user_password(tenant_a.principal, user.email, "another long password, new")
        assert (await mcp_ping(http, oauth_server, tokens.access_token)).status_code == 401
        assert (await refresh(http, oauth_server, tokens.client_id, tokens.refresh_token)).status_code == 400
        fresh = await obtain_tokens(http, oauth_server, replace(user, password="another long password, new"))
        assert (await mcp_ping(http, oauth_server, fresh.access_token)).status_code == 200

    async def test_rest_api_does_not_accept_access_tokens(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User
    ) -> None:
        tokens = await obtain_tokens(http, oauth_server, user_a)
        bearer = {"Authorization": f"Bearer {tokens.access_token}"}
        r = await http.get(f"{oauth_server.base}/v1/namespaces", headers=bearer)
        assert r.status_code == 401  # the token's audience is /mcp alone: no passthrough to other APIs


class TestRegistration:
    async def test_public_client_gets_no_secret(self, oauth_server: Server, http: httpx.AsyncClient) -> None:
        body = await register(http, oauth_server, token_endpoint_auth_method="client_secret_post")
        assert body["client_id"].startswith("mvc_") and "client_secret" not in body
        assert body["token_endpoint_auth_method"] == "none"
        assert body["redirect_uris"] == [REDIRECT]

    @pytest.mark.parametrize(
        "uris",
        [[], ["http://evil.example/cb"], ["javascript:alert(1)"], ["https://ok.example/cb#frag"], "not-a-list"],
    )
    async def test_bad_redirect_uris_are_refused(
        self, oauth_server: Server, http: httpx.AsyncClient, uris: object
    ) -> None:
        r = await http.post(f"{oauth_server.base}/oauth/register", json={"redirect_uris": uris})
        assert r.status_code == 400 and r.json()["error"] == "invalid_redirect_uri"

    async def test_custom_schemes_are_allowed(self, oauth_server: Server, http: httpx.AsyncClient) -> None:
        body = await register(http, oauth_server, redirect_uris=["cursor://anysphere.cursor-mcp/oauth/callback"])
        assert body["redirect_uris"] == ["cursor://anysphere.cursor-mcp/oauth/callback"]

    async def test_bad_body(self, oauth_server: Server, http: httpx.AsyncClient) -> None:
        r = await http.post(f"{oauth_server.base}/oauth/register", content=b"{nope")
        assert r.status_code == 400 and r.json()["error"] == "invalid_client_metadata"
        r = await http.post(
            f"{oauth_server.base}/oauth/register", json={"redirect_uris": [REDIRECT], "grant_types": ["password"]}
        )
        assert r.status_code == 400 and r.json()["error"] == "invalid_client_metadata"


class TestMetadataDocuments:
    async def test_https_only_and_no_private_addresses(self) -> None:
        with pytest.raises(UnknownClient, match="https"):
            await clients.fetch_metadata_document("http://127.0.0.1:9/client.json", allow_insecure=False)
        with pytest.raises(UnknownClient, match="private address"):
            await clients.fetch_metadata_document("https://127.0.0.1:9/client.json", allow_insecure=False)
        with pytest.raises(UnknownClient, match="private address"):
            await clients.fetch_metadata_document("https://localhost:9/client.json", allow_insecure=False)


def _b64(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
