"""Where a browser may be sent (issue 27 item 8, RFC 9700 and the MCP authorization spec): no
userinfo, no fragment, real ports, private-use schemes only as reversed domain names; no open
redirect through a client nobody let in; the consent page names scheme, host and port; the
sign-in ticket answers once; the forms are posted only from our own pages."""

from __future__ import annotations

from urllib.parse import urlencode

import httpx
import pytest

from memvault.oauth import pages
from tests.oauth.conftest import (
    REDIRECT,
    Browser,
    Server,
    User,
    authorization_url,
    hidden_fields,
    obtain_tokens,
    pkce,
    redirect_params,
    register,
)

REFUSED = [
    "https://claude.ai@evil.example/landing",
    "https://user:pw@app.example/cb",
    "view-source:https://app.example/cb",
    "mailto:someone@example.com",
    "filesystem:https://app.example/temporary/cb",
    "javascript:alert(1)",
    "data:text/html,hi",
    "myapp:/cb",  # not a reversed domain name
    "vscode://vscode.github-authentication/did-authenticate",
    "http://127.0.0.1:99999/cb",
    "http://127.0.0.1:0/cb",
    "http://127.0.0.1:33418/cb#frag",
    "https://app.example/c b",
]


class TestRegistration:
    @pytest.mark.parametrize("uri", REFUSED)
    async def test_refused(self, oauth_server: Server, http: httpx.AsyncClient, uri: str) -> None:
        r = await http.post(f"{oauth_server.base}/oauth/register", json={"redirect_uris": [uri]})
        assert r.status_code == 400 and r.json()["error"] == "invalid_redirect_uri", (uri, r.text)

    @pytest.mark.parametrize(
        "uri",
        [
            "com.example.app:/oauth/callback",
            "dev.memvault.desktop://cb",
            "https://app.example:8443/cb",
            # Named in MEMVAULT_OAUTH_EXTRA_REDIRECT_SCHEMES by default: Cursor's real redirect URI.
            "cursor://anysphere.cursor-mcp/oauth/callback",
        ],
    )
    async def test_allowed(self, oauth_server: Server, http: httpx.AsyncClient, uri: str) -> None:
        assert (await register(http, oauth_server, redirect_uris=[uri]))["redirect_uris"] == [uri]


class TestAuthorization:
    @pytest.mark.parametrize(
        "uri",
        ["http://127.0.0.1:5999/callback#x", "http://127.0.0.1:99999/callback", "http://u@127.0.0.1:5999/callback"],
    )
    async def test_loopback_port_exception_lets_nothing_else_through(
        self, oauth_server: Server, http: httpx.AsyncClient, uri: str
    ) -> None:
        client = await register(http, oauth_server)
        r = await http.get(authorization_url(oauth_server, client["client_id"], pkce()[1], redirect_uri=uri))
        assert r.status_code == 400 and "location" not in r.headers

    async def test_a_client_nobody_let_in_is_no_redirector(self, oauth_server: Server, http: httpx.AsyncClient) -> None:
        client = await register(http, oauth_server, redirect_uris=["https://evil.example/landing"])
        for bad in ({"response_type": "x"}, {"code_challenge": None}, {"resource": None}, {"scope": "admin"}):
            url = authorization_url(
                oauth_server, client["client_id"], pkce()[1], redirect_uri="https://evil.example/landing", **bad
            )
            r = await http.get(url)
            assert r.status_code == 400 and "location" not in r.headers, bad
            assert "not valid" in r.text

    async def test_a_client_someone_let_in_gets_errors_at_its_uri(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User
    ) -> None:
        client_id = (await obtain_tokens(http, oauth_server, user_a)).client_id
        url = authorization_url(oauth_server, client_id, pkce()[1], response_type="token", state="s9")
        q = redirect_params(await http.get(url))
        assert q["error"] == "unsupported_response_type" and q["state"] == "s9"

    async def test_consent_page_names_scheme_host_and_port(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User
    ) -> None:
        client = await register(http, oauth_server, redirect_uris=["https://app.example:8443/cb", REDIRECT])
        for uri, shown in (
            ("https://app.example:8443/cb", "https://app.example:8443"),
            (REDIRECT, "http://127.0.0.1:33418"),
        ):
            url = authorization_url(oauth_server, client["client_id"], pkce()[1], redirect_uri=uri)
            page = await Browser(http, user_a).sign_in(url)
            assert f"<code>{shown}</code>" in page.text, page.text


def test_the_destination_shown_is_where_the_browser_goes() -> None:
    # Registration refuses userinfo now; the page would not show it even for a client stored before.
    assert pages.destination("https://claude.ai@evil.example/landing") == "https://evil.example:443"
    assert pages.destination("https://app.example/cb") == "https://app.example:443"
    assert pages.destination("http://[::1]:5000/cb") == "http://[::1]:5000"
    assert pages.destination("com.example.app:/cb") == "com.example.app:"


class TestTicketAndOrigin:
    async def _consent_form(
        self, http: httpx.AsyncClient, server: Server, user: User
    ) -> tuple[str, list[tuple[str, str]]]:
        client = await register(http, server)
        url = authorization_url(server, client["client_id"], pkce()[1])
        page = await Browser(http, user).sign_in(url)
        assert page.status_code == 200
        return url, [*hidden_fields(page.text), ("namespace", "default"), ("grant_scope", "read")]

    async def test_the_ticket_answers_once(self, oauth_server: Server, http: httpx.AsyncClient, user_a: User) -> None:
        for first, second in (("allow", "allow"), ("deny", "allow"), ("allow", "deny")):
            _, form = await self._consent_form(http, oauth_server, user_a)
            headers = {"Content-Type": "application/x-www-form-urlencoded", "Origin": oauth_server.base}
            post = f"{oauth_server.base}/oauth/authorize"
            r = await http.post(post, content=urlencode([*form, ("decision", first)]), headers=headers)
            assert r.status_code == 303
            r = await http.post(post, content=urlencode([*form, ("decision", second)]), headers=headers)
            assert r.status_code == 401 and "already used" in r.text and "location" not in r.headers

    async def test_a_mistake_on_the_page_does_not_spend_it(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User
    ) -> None:
        _, form = await self._consent_form(http, oauth_server, user_a)
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Origin": oauth_server.base}
        post = f"{oauth_server.base}/oauth/authorize"
        no_namespace = [(k, v) for k, v in form if k != "namespace"]
        r = await http.post(post, content=urlencode([*no_namespace, ("decision", "allow")]), headers=headers)
        assert r.status_code == 400 and "Choose at least one namespace" in r.text
        r = await http.post(post, content=urlencode([*form, ("decision", "allow")]), headers=headers)
        assert r.status_code == 303 and "code=" in r.headers["location"]

    @pytest.mark.parametrize("origin", ["https://evil.example", "null", None, "http://127.0.0.1:1"])
    async def test_forms_from_elsewhere_are_refused(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User, origin: str | None
    ) -> None:
        _, form = await self._consent_form(http, oauth_server, user_a)
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if origin is not None:
            headers["Origin"] = origin
        post = f"{oauth_server.base}/oauth/authorize"
        r = await http.post(post, content=urlencode([*form, ("decision", "allow")]), headers=headers)
        assert r.status_code == 403 and "location" not in r.headers
        # The real page's post still works afterwards: the refusal spent nothing.
        headers["Origin"] = oauth_server.base
        r = await http.post(post, content=urlencode([*form, ("decision", "allow")]), headers=headers)
        assert r.status_code == 303
