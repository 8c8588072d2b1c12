"""The account dashboard as a new customer meets it, in headless Chromium against a served app:
sign up, follow the mailed link (from the log mailer), sign in, create a namespace, store memories
through the API, find one in the explorer with its signal breakdown, create a key and use it,
revoke it and see 401, invite a viewer who sees no key buttons, revoke a connected app, and find
the requests made in the usage chart. Then what must not work: another organisation's member
opening this one's memory (404), and a form posted without its token (403). Every page is also
opened on a 375 px phone: nothing scrolls sideways and nothing is logged to the console."""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

from memvault.api import NamespaceAPI
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from tests.browser.conftest import PHONE, _require_browser, console_errors, overflow, serve
from tests.conftest import make_tenant
from tests.dashboard.conftest import PASSWORD as MEMBER_PASSWORD
from tests.dashboard.conftest import add_member
from tests.oauth.conftest import Server, User, mcp_ping, obtain_tokens
from tests.servers import free_port

PASSWORD = "a long enough password"
WAIT_S = 20


class Mailbox(logging.Handler):
    """The log mailer's messages, as the operator of a fresh install reads them in the log."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def link(self, to: str, path: str) -> str:
        """The path and query of the last link to ``path`` mailed to ``to``."""
        for message in reversed(self.messages):
            if message.startswith(f"mail to {to} "):
                found = re.search(rf"https?://\S+?({re.escape(path)}\?token=\S+)", message)
                if found:
                    return found.group(1)
        raise AssertionError(f"no mail to {to} with a link to {path}: {self.messages}")


@dataclass
class Site:
    url: str
    mailbox: Mailbox
    pages: set[str] = field(default_factory=set)


@pytest.fixture(scope="module")
def journey_site(settings: Settings, pg_urls: DatabaseUrls) -> Iterator[Site]:
    """The app as the embedded default serves it (no Redis), its public URL its own port (mailed
    links and OAuth name it), open sign-up and the log mailer."""
    _require_browser()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    mailbox = Mailbox()
    mail_log = logging.getLogger("memvault.mail")
    mail_log.addHandler(mailbox)
    try:
        with serve(
            settings,
            pg_urls,
            port=port,
            redis_url=None,
            public_url=base,
            oauth_cimd_allow_insecure=True,
            signup="open",
            mailer="log",
        ) as url:
            yield Site(url, mailbox)
    finally:
        mail_log.removeHandler(mailbox)


def wait_for(driver: Any, element_id: str) -> Any:
    return WebDriverWait(driver, WAIT_S).until(ec.presence_of_element_located((By.ID, element_id)))


def open_page(driver: Any, site: Site, path: str) -> None:
    driver.get(f"{site.url}{path}")
    site.pages.add(urlsplit(driver.current_url).path)


def fill(driver: Any, fields: dict[str, str]) -> None:
    for element_id, value in fields.items():
        box = driver.find_element(By.ID, element_id)
        box.clear()
        box.send_keys(value)


def gone(element: Any) -> Any:
    """Whether the page ``element`` was on has been replaced. Chromedriver answers a check of an
    element of a page it has left with either a stale-element error or an inspector error."""

    def check(_: Any) -> bool:
        try:
            element.is_enabled()
        except WebDriverException:
            return True
        return False

    return check


def submit(driver: Any, button_id: str, then: str) -> Any:
    """Click a form's button and wait for the page it leads to (an element of it by id)."""
    old = driver.find_element(By.TAG_NAME, "html")
    WebDriverWait(driver, WAIT_S).until(ec.element_to_be_clickable((By.ID, button_id))).click()
    WebDriverWait(driver, WAIT_S).until(gone(old))
    return wait_for(driver, then)


def sign_in(driver: Any, site: Site, email: str, password: str) -> None:
    driver.delete_all_cookies()
    open_page(driver, site, "/dashboard/signin")
    fill(driver, {"email": email, "password": password})
    submit(driver, "signin", "nav-overview")


def row_id(driver: Any, table_id: str, prefix: str, text: str) -> str:
    """The uuid in the id of the row of ``table_id`` that shows ``text``."""
    for row in driver.find_elements(By.CSS_SELECTOR, f"#{table_id} tr[id^='{prefix}']"):
        if text in row.text:
            return str(row.get_attribute("id")).removeprefix(prefix)
    raise AssertionError(f"no row showing {text!r} in #{table_id}")


async def test_a_new_customer_from_sign_up_to_usage(
    journey_site: Site, wide: Any, api: NamespaceAPI, pg_urls: DatabaseUrls
) -> None:
    site, driver = journey_site, wide
    email = f"founder-{uuid.uuid4().hex[:8]}@example.com"
    organisation = f"Acme {uuid.uuid4().hex[:6]}"
    driver.delete_all_cookies()

    # Sign up, and verify through the link the log mailer wrote.
    open_page(driver, site, "/signup")
    fill(driver, {"organisation": organisation, "email": email, "password": PASSWORD})
    submit(driver, "signup-submit", "sent")
    open_page(driver, site, site.mailbox.link(email, "/signup/verify"))
    admin_key = submit(driver, "verify-submit", "api-key").text.strip()
    assert admin_key.startswith("mv_")
    submit(driver, "dashboard-link", "signin")

    # Sign in: the overview shows the plan and how to connect.
    fill(driver, {"email": email, "password": PASSWORD})
    submit(driver, "signin", "plan")
    assert organisation in driver.find_element(By.ID, "account").text
    assert driver.find_element(By.ID, "mcp-url").text.strip() == f"{site.url}/mcp"

    # Create a namespace, then store memories in it through the REST API.
    open_page(driver, site, "/dashboard/namespaces")
    fill(driver, {"ns-name": "support"})
    form = driver.find_element(By.ID, "create-namespace")
    old = driver.find_element(By.TAG_NAME, "html")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(driver, WAIT_S).until(gone(old))
    open_page(driver, site, "/dashboard/namespaces")
    assert "support" in driver.find_element(By.ID, "namespace-list").text
    admin = {"Authorization": f"Bearer {admin_key}"}
    async with httpx.AsyncClient(base_url=site.url, headers=admin, timeout=60) as rest:
        for content in (
            "The customer prefers to be called Sam",
            "Sam's order 1142 shipped to Lisbon on Monday",
            "Sam is allergic to peanuts",
        ):
            r = await rest.post("/v1/namespaces/support/memories", json={"content": content})
            assert r.status_code == 201, r.text
        rest_calls = 3

        # The explorer finds one, with the signals that ranked it.
        open_page(driver, site, "/dashboard/explorer?namespace=support")
        Select(driver.find_element(By.ID, "namespace")).select_by_value("support")
        fill(driver, {"query": "food allergy"})
        submit(driver, "search", "hits")
        first = driver.find_elements(By.CSS_SELECTOR, "#hits .hit")[0]
        assert "peanuts" in first.text
        memory_id = str(first.get_attribute("id")).removeprefix("hit-")
        bars = driver.find_elements(By.CSS_SELECTOR, f"#breakdown-{memory_id} rect")
        assert bars and any(float(b.get_attribute("width") or 0) > 0 for b in bars)
        first.find_element(By.CSS_SELECTOR, f"a[href*='{memory_id}']").click()
        wait_for(driver, "versions")
        site.pages.add(urlsplit(driver.current_url).path)
        assert "peanuts" in driver.find_element(By.ID, "memory-content").text

        # A key made on the page works on the API until it is revoked there.
        open_page(driver, site, "/dashboard/keys")
        fill(driver, {"key-name": "support bot"})
        driver.find_element(By.ID, "scope-read").click()
        secret = submit(driver, "create-key-submit", "new-secret").text.strip()
        assert secret.startswith("mv_") and driver.find_elements(By.ID, "copy-secret")
        bot = {"Authorization": f"Bearer {secret}"}
        assert (await rest.get("/v1/namespaces", headers=bot)).status_code == 200
        open_page(driver, site, "/dashboard/keys")
        key_id = row_id(driver, "keys", "key-", "support bot")
        submit(driver, f"revoke-{key_id}", "notice")
        assert (await rest.get("/v1/namespaces", headers=bot)).status_code == 401
        rest_calls += 1  # the refused call names no organisation: nobody's usage

        # An MCP client the founder signed in to is listed under connected apps; revoking it there
        # signs the client out.
        server = Server(site.url, None)
        founder = User(uuid.uuid4(), email, None, PASSWORD)  # type: ignore[arg-type]
        async with httpx.AsyncClient(timeout=60) as http:
            tokens = await obtain_tokens(http, server, founder, namespaces=["support"])
            assert (await mcp_ping(http, server, tokens.access_token)).status_code == 200
            open_page(driver, site, "/dashboard/apps")
            grant_id = row_id(driver, "apps", "app-", "Test Client")
            submit(driver, f"revoke-app-{grant_id}", "notice")
            assert not driver.find_elements(By.ID, f"app-{grant_id}")
            assert (await mcp_ping(http, server, tokens.access_token)).status_code == 401

        # Invite a viewer; they accept from the mailed link and see no key or member buttons.
        viewer = f"viewer-{uuid.uuid4().hex[:8]}@example.com"
        open_page(driver, site, "/dashboard/members")
        fill(driver, {"invite-email": viewer})
        Select(driver.find_element(By.ID, "invite-role")).select_by_value("viewer")
        submit(driver, "invite-submit", "invitations")
        assert viewer in driver.find_element(By.ID, "invitations").text
        driver.delete_all_cookies()
        open_page(driver, site, site.mailbox.link(viewer, "/invitations/accept"))
        fill(driver, {"password": PASSWORD})
        submit(driver, "accept-submit", "dashboard-link")
        sign_in(driver, site, viewer, PASSWORD)
        assert not driver.find_elements(By.ID, "nav-keys") and not driver.find_elements(By.ID, "nav-members")
        open_page(driver, site, "/dashboard/keys")
        assert driver.find_element(By.ID, "error-code").text == "forbidden"
        driver.get_log("browser")  # that 403 was the point; the console keeps it
        open_page(driver, site, f"/dashboard/explorer/support/memories/{memory_id}")
        wait_for(driver, "memory")
        assert not driver.find_elements(By.ID, "archive") and not driver.find_elements(By.ID, "forget")

    # The usage page counts the REST calls made above (the meter flushes every few seconds).
    sign_in(driver, site, email, PASSWORD)
    counted = 0
    for _ in range(20):
        open_page(driver, site, "/dashboard/usage?days=7&group=door")
        counted = rest_requests(driver)
        if counted >= rest_calls:
            break
        await asyncio.sleep(0.5)
    assert counted >= rest_calls
    assert driver.find_element(By.ID, "usage-chart-door").get_attribute("aria-label")
    assert console_errors(driver) == []

    # Another organisation's owner opening this memory's address gets 404, not the memory.
    other = await make_tenant(api, "other")
    stranger = await add_member(api, other, "owner")
    sign_in(driver, site, stranger, MEMBER_PASSWORD)
    open_page(driver, site, f"/dashboard/explorer/support/memories/{memory_id}")
    assert driver.find_element(By.ID, "error-code").text in ("not_found", "namespace_not_found", "memory_not_found")
    assert "peanuts" not in driver.page_source

    # A form posted without its token is refused, and nothing is made.
    open_page(driver, site, "/dashboard/namespaces")
    driver.execute_script("document.querySelector('#create-namespace input[name=csrf]').remove()")
    fill(driver, {"ns-name": "forged"})
    old = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.ID, "create-namespace").find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(driver, WAIT_S).until(gone(old))
    assert driver.find_element(By.ID, "error-code").text == "csrf_failed"
    open_page(driver, site, "/dashboard/namespaces")
    assert "forged" not in driver.find_element(By.ID, "namespace-list").text


def rest_requests(driver: Any) -> int:
    """The requests the usage table counts on the REST door."""
    for row in driver.find_elements(By.CSS_SELECTOR, "#usage-rows-door tr"):
        if row.find_element(By.CSS_SELECTOR, "td.group").text == "rest":
            return int(row.find_element(By.CSS_SELECTOR, "td[data-unit=requests]").text.replace(",", ""))
    return 0


PAGES = (
    "/dashboard",
    "/dashboard/usage",
    "/dashboard/namespaces",
    "/dashboard/namespaces/default",
    "/dashboard/explorer?namespace=default&query=hello",
    "/dashboard/keys",
    "/dashboard/members",
    "/dashboard/apps",
    "/dashboard/jobs",
    "/dashboard/audit",
    "/dashboard/signin",
    "/signup",
)


def wider_than_the_screen(driver: Any) -> list[str]:
    """The innermost elements that stick out past the phone's right edge, to name the culprit."""
    script = """
        const w = arguments[0];
        const out = (e) => e.getBoundingClientRect().right > w + 1;
        return [...document.querySelectorAll('body *')]
            .filter((e) => out(e) && ![...e.children].some(out) && !e.closest('.table-scroll'))
            .slice(0, 3)
            .map((e) => `${e.tagName}#${e.id}.${e.className} ${Math.round(e.getBoundingClientRect().right)}`)
            .concat([...document.querySelectorAll('.table-scroll, main')].map(
                (e) => `${e.tagName}.${e.className} width ${Math.round(e.getBoundingClientRect().width)}`));
    """
    return list(driver.execute_script(script, PHONE))


ANONYMOUS_PAGES = ("/dashboard/signin", "/signup")


@pytest.fixture
async def phone_owner(api: NamespaceAPI) -> str:
    tenant = await make_tenant(api, "phone")
    return await add_member(api, tenant, "owner")


@pytest.mark.parametrize("path", PAGES)
def test_every_page_fits_a_375px_phone(path: str, journey_site: Site, phone: Any, phone_owner: str) -> None:
    if path.startswith(ANONYMOUS_PAGES):
        phone.delete_all_cookies()
    else:
        sign_in(phone, journey_site, phone_owner, MEMBER_PASSWORD)
    phone.get(f"{journey_site.url}{path}")
    # A page wider than the phone makes the browser zoom out (innerWidth grows) rather than scroll.
    assert phone.execute_script("return window.innerWidth") == PHONE, wider_than_the_screen(phone)
    assert overflow(phone) == 0, f"{path} scrolls sideways on a phone: {wider_than_the_screen(phone)}"
    assert console_errors(phone) == []
