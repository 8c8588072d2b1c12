"""Signing in to the dashboard and out: the cookie, the form tokens, and what ends a session."""

from __future__ import annotations

import hashlib
import uuid

import psycopg

from memvault.api import NamespaceAPI
from memvault.db.urls import DatabaseUrls
from memvault.principal import Principal
from tests.conftest import Tenant
from tests.dashboard.conftest import PASSWORD, Browser, add_member, csrf_in
from tests.db.conftest import conninfo


async def test_a_page_sends_a_stranger_to_sign_in_and_back(browser: Browser, owner_of_a: str, tenant_a: Tenant) -> None:
    r = await browser.get("/dashboard?days=7")
    assert r.status_code == 303
    assert r.headers["location"] == "/dashboard/signin?next=%2Fdashboard%3Fdays%3D7"
    page = await browser.get(r.headers["location"])
    assert page.status_code == 200 and 'name="next" value="/dashboard?days=7"' in page.text
    r = await browser.post(
        "/dashboard/signin", {"email": owner_of_a, "password": PASSWORD, "next": "/dashboard?days=7"}
    )
    assert r.status_code == 303 and r.headers["location"] == "/dashboard?days=7"
    home = await browser.get("/dashboard")
    assert home.status_code == 200 and tenant_a.name in home.text and owner_of_a in home.text


async def test_the_session_cookie_is_http_only_lax_and_for_the_dashboard_alone(
    browser: Browser, owner_of_a: str
) -> None:
    r = await browser.sign_in(owner_of_a)
    cookie = r.headers["set-cookie"].lower()
    assert cookie.startswith("mv_session=")
    assert "httponly" in cookie and "samesite=lax" in cookie and "path=/dashboard" in cookie


async def test_a_wrong_password_signs_nobody_in(browser: Browser, owner_of_a: str) -> None:
    await browser.get("/dashboard/signin")
    r = await browser.post("/dashboard/signin", {"email": owner_of_a, "password": "not the password"})
    assert r.status_code == 401 and "not right" in r.text
    assert "mv_session" not in browser.http.cookies
    assert (await browser.get("/dashboard")).status_code == 303


async def test_after_sign_in_it_never_leaves_for_another_site(browser: Browser, owner_of_a: str) -> None:
    await browser.get("/dashboard/signin")
    for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example"):
        r = await browser.post("/dashboard/signin", {"email": owner_of_a, "password": PASSWORD, "next": target})
        assert r.status_code == 303 and r.headers["location"] == "/dashboard"


class TestForms:
    async def test_a_sign_in_without_its_token_is_refused(self, browser: Browser, owner_of_a: str) -> None:
        await browser.get("/dashboard/signin")
        r = await browser.post("/dashboard/signin", {"email": owner_of_a, "password": PASSWORD}, csrf="")
        assert r.status_code == 403 and "text/html" in r.headers["content-type"]
        assert "csrf_failed" in r.text and "mv_session" not in browser.http.cookies

    async def test_a_signed_in_form_without_its_token_is_refused(self, signed_in: Browser) -> None:
        r = await signed_in.post("/dashboard/signout", csrf="")
        assert r.status_code == 403 and "csrf_failed" in r.text
        assert (await signed_in.get("/dashboard")).status_code == 200  # still signed in

    async def test_another_sessions_token_does_not_pass(
        self, signed_in: Browser, second_browser: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        await second_browser.sign_in(await add_member(api, tenant_a, "admin"))
        await second_browser.get("/dashboard")
        r = await signed_in.post("/dashboard/signout", csrf=csrf_in(second_browser.last_page))
        assert r.status_code == 403

    async def test_a_post_from_another_origin_is_refused(self, signed_in: Browser) -> None:
        await signed_in.get("/dashboard")
        token = csrf_in(signed_in.last_page)
        r = await signed_in.http.post(
            "/dashboard/signout", data={"csrf": token}, headers={"Origin": "https://evil.example"}
        )
        assert r.status_code == 403


class TestEnding:
    async def test_sign_out_ends_the_session_for_every_copy_of_its_cookie(
        self, signed_in: Browser, second_browser: Browser
    ) -> None:
        copied = signed_in.http.cookies.get("mv_session")
        await signed_in.get("/dashboard")
        r = await signed_in.post("/dashboard/signout")
        assert r.status_code == 303 and r.headers["location"] == "/dashboard/signin"
        second_browser.http.cookies.set("mv_session", copied, domain="memvault.test", path="/dashboard")
        assert (await second_browser.get("/dashboard")).status_code == 303

    async def test_a_disabled_member_is_signed_out_at_the_next_click(
        self, browser: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        email = await add_member(api, tenant_a, "member")
        await browser.sign_in(email)
        assert (await browser.get("/dashboard")).status_code == 200
        user = await api.find_user(tenant_a.principal, email)
        await api.disable_user(tenant_a.principal, user.id)
        assert (await browser.get("/dashboard")).status_code == 303

    async def test_an_expired_session_asks_to_sign_in_again(
        self, signed_in: Browser, pg_urls: DatabaseUrls, tenant_a: Tenant
    ) -> None:
        async with await psycopg.AsyncConnection.connect(conninfo(pg_urls.owner), autocommit=True) as owner:
            await owner.execute(
                "UPDATE web_sessions SET expires_at = now() - interval '1 second' WHERE tenant_id = %s", (tenant_a.id,)
            )
        assert (await signed_in.get("/dashboard")).status_code == 303

    async def test_the_token_is_kept_only_as_its_hash(
        self, signed_in: Browser, pg_urls: DatabaseUrls, tenant_a: Tenant
    ) -> None:
        token = signed_in.http.cookies.get("mv_session")
        async with await psycopg.AsyncConnection.connect(conninfo(pg_urls.owner), autocommit=True) as owner:
            stored = await (
                await owner.execute("SELECT token_hash FROM web_sessions WHERE tenant_id = %s", (tenant_a.id,))
            ).fetchall()
        assert [bytes(r[0]) for r in stored] == [hashlib.sha256(token.encode()).digest()]


async def test_a_session_acts_as_its_member_with_the_members_role(api: NamespaceAPI, tenant_a: Tenant) -> None:
    email = await add_member(api, tenant_a, "viewer", namespaces=["default"])
    token = await api.open_web_session(email, PASSWORD)
    me = await api.web_session(token)
    assert me.role == "viewer" and me.tenant_name == tenant_a.name
    p: Principal = me.principal
    assert p.tenant_id == tenant_a.id and p.has("read") and not p.has("write")
    assert p.namespaces == frozenset({"default"}) and p.user_id == str(me.user_id)


async def test_pages_answer_errors_as_pages(signed_in: Browser) -> None:
    r = await signed_in.get(f"/dashboard/no-such-page-{uuid.uuid4().hex[:6]}")
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    assert "Content-Security-Policy" in r.headers


async def test_pages_allow_no_inline_script_and_no_other_origin(signed_in: Browser) -> None:
    r = await signed_in.get("/dashboard")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp
    assert '<script src="/static/dashboard.js" defer></script>' in r.text and "<script>" not in r.text


async def test_a_post_from_the_public_url_passes_behind_a_proxy(
    signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant
) -> None:
    """Behind a proxy that terminates TLS the app sees its own address, the browser the public one."""
    public = api.oauth_endpoint_base()
    assert not public.startswith("http://memvault.test")
    await signed_in.get("/dashboard")
    r = await signed_in.http.post(
        "/dashboard/signout", data={"csrf": csrf_in(signed_in.last_page)}, headers={"Origin": public}
    )
    assert r.status_code == 303
