"""The account pages before sign-in, as a browser uses them: sign up, follow the mailed link (the
log mailer's, as on a fresh server), verify, see the key once, then sign in to the dashboard;
accept an invitation and sign in. Every form needs the token of its page."""

from __future__ import annotations

import logging
import re
import uuid
from html import unescape
from urllib.parse import urlsplit

import pytest

from memvault.api import NamespaceAPI
from memvault.members.schemas import InvitationIn
from tests.conftest import Tenant
from tests.dashboard.conftest import PASSWORD, Browser, csrf_in

MAIL_LOG = "memvault.mail"


def mailed_link(caplog: pytest.LogCaptureFixture, address: str, path: str) -> str:
    """The path and query of the last link the log mailer sent ``address`` (the page's own
    origin is the test's, not the public URL the mail names)."""
    texts = [r.getMessage() for r in caplog.records if r.name == MAIL_LOG and address in r.getMessage()]
    assert texts, f"no mail to {address}"
    [url] = re.findall(rf"https?://\S+{re.escape(path)}\?token=\S+", texts[-1])
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


def element(html: str, element_id: str) -> str:
    found = re.search(rf'<(\w+)[^>]*\bid="{re.escape(element_id)}"[^>]*>(.*?)</\1>', html, flags=re.S)
    assert found, f"no #{element_id} in the page"
    return found.group(0)


def fresh_email() -> str:
    return f"signup-{uuid.uuid4().hex[:10]}@example.com"


class TestSignUp:
    async def test_sign_up_verify_see_the_key_once_and_sign_in(
        self, browser: Browser, caplog: pytest.LogCaptureFixture
    ) -> None:
        address, organisation = fresh_email(), f"Org {fresh_email()[7:17]}"
        page = await browser.get("/signup")
        assert page.status_code == 200 and 'id="signup"' in page.text
        assert "mv_csrf" in browser.http.cookies
        with caplog.at_level(logging.WARNING, logger=MAIL_LOG):
            r = await browser.post("/signup", {"organisation": organisation, "email": address, "password": PASSWORD})
        assert r.status_code == 201 and "Check your mail" in r.text and address in r.text

        link = mailed_link(caplog, address, "/signup/verify")
        page = await browser.get(link)
        assert page.status_code == 200 and 'id="verify"' in page.text
        done = await browser.post("/signup/verify", {"token": link.split("?token=", 1)[1]})
        assert done.status_code == 200
        key = unescape(re.sub(r"<[^>]+>", "", element(done.text, "api-key"))).strip()
        assert key.startswith("mv") and 'data-copy="api-key"' in done.text
        assert 'href="/dashboard/signin" id="dashboard-link"' in done.text
        assert "MCP clients" in done.text and "script-src 'self'" in done.headers["content-security-policy"]
        r = await browser.http.get("/v1/namespaces", headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200 and [n["name"] for n in r.json()] == ["default"]

        # The key is shown once: verifying again shows none, and still leads to sign-in.
        await browser.get(link)
        again = await browser.post("/signup/verify", {"token": link.split("?token=", 1)[1]})
        assert again.status_code == 200 and "Already verified" in again.text and key not in again.text
        assert 'id="dashboard-link"' in again.text

        await browser.sign_in(address)
        home = await browser.get("/dashboard")
        assert home.status_code == 200 and organisation in home.text and "(owner)" in home.text

    async def test_a_sign_up_without_its_token_is_refused(
        self, browser: Browser, caplog: pytest.LogCaptureFixture
    ) -> None:
        address = fresh_email()
        await browser.get("/signup")
        form = {"organisation": f"Org {address[7:17]}", "email": address, "password": PASSWORD}
        with caplog.at_level(logging.WARNING, logger=MAIL_LOG):
            r = await browser.post("/signup", form, csrf="")
        assert r.status_code == 403 and r.headers["content-type"].startswith("text/html")
        assert "csrf_failed" in r.text
        assert not [rec for rec in caplog.records if rec.name == MAIL_LOG and address in rec.getMessage()]

    async def test_another_visitors_token_does_not_pass(self, browser: Browser, second_browser: Browser) -> None:
        await browser.get("/signup")
        await second_browser.get("/signup")
        address = fresh_email()
        form = {"organisation": f"Org {address[7:17]}", "email": address, "password": PASSWORD}
        r = await browser.post("/signup", form, csrf=csrf_in(second_browser.last_page))
        assert r.status_code == 403

    async def test_a_refusal_shows_the_form_again_with_the_reason(self, browser: Browser) -> None:
        await browser.get("/signup")
        address = fresh_email()
        r = await browser.post("/signup", {"organisation": "Org x", "email": address, "password": "short"})
        assert r.status_code == 422 and "at least 10 characters" in r.text
        assert 'id="error"' in r.text and f'value="{address}"' in r.text and 'id="signup"' in r.text
        assert "short" not in re.findall(r'name="password"[^>]*>', r.text)[0]  # never echoed

    async def test_the_pages_limit_stays(self, browser: Browser, api: NamespaceAPI) -> None:
        """The page counts against the same per-address sign-up limit as POST /v1/signup."""
        limit = int(api._settings.signup_limit.split("/", 1)[0])
        await browser.get("/signup")
        for _ in range(limit):
            r = await browser.post("/signup", {"organisation": "Org y", "email": fresh_email(), "password": "short"})
            assert r.status_code == 422
        r = await browser.post("/signup", {"organisation": "Org y", "email": fresh_email(), "password": PASSWORD})
        assert r.status_code == 429 and int(r.headers["retry-after"]) > 0 and 'id="signup"' in r.text

    async def test_a_bad_link_is_refused_on_the_page(self, browser: Browser) -> None:
        await browser.get("/signup/verify?token=not-a-token")
        r = await browser.post("/signup/verify", {"token": "not-a-token"})
        assert r.status_code == 400 and 'id="error"' in r.text and 'id="verify"' in r.text
        assert 'id="api-key"' not in r.text

    @pytest.mark.parametrize("path", ["/signup/verify", "/invitations/accept"])
    async def test_the_link_forms_need_their_token(self, browser: Browser, path: str) -> None:
        await browser.get(f"{path}?token=x")
        r = await browser.post(path, {"token": "x", "password": PASSWORD}, csrf="")
        assert r.status_code == 403 and "csrf_failed" in r.text


class TestInvitation:
    async def test_accept_then_sign_in_to_the_dashboard(
        self, browser: Browser, api: NamespaceAPI, tenant_a: Tenant, caplog: pytest.LogCaptureFixture
    ) -> None:
        address = fresh_email()
        with caplog.at_level(logging.WARNING, logger=MAIL_LOG):
            await api.invite_member(tenant_a.principal, InvitationIn(email=address, role="viewer"))
        link = mailed_link(caplog, address, "/invitations/accept")
        page = await browser.get(link)
        assert page.status_code == 200 and 'id="accept"' in page.text
        token = link.split("?token=", 1)[1]
        weak = await browser.post("/invitations/accept", {"token": token, "password": "short"})
        assert weak.status_code == 422 and 'id="accept"' in weak.text
        done = await browser.post("/invitations/accept", {"token": token, "password": PASSWORD})
        assert done.status_code == 201 and tenant_a.name in done.text
        assert 'href="/dashboard/signin" id="dashboard-link"' in done.text and "MCP clients" in done.text
        await browser.sign_in(address)
        home = await browser.get("/dashboard")
        assert home.status_code == 200 and "(viewer)" in home.text

    async def test_a_forged_link_is_refused_on_the_page(self, browser: Browser) -> None:
        await browser.get("/invitations/accept?token=forged")
        r = await browser.post("/invitations/accept", {"token": "forged", "password": PASSWORD})
        assert r.status_code == 400 and 'id="error"' in r.text and 'id="accept"' in r.text
        assert "mv_session" not in browser.http.cookies
