"""The webhooks pages in headless Chromium: an owner adds an endpoint pointing at a real receiver on
127.0.0.1 (MEMVAULT_WEBHOOK_ALLOW_PRIVATE on, as for local development), copies the secret shown
once, stores a memory through the API, and sees the signed delivery arrive at the receiver and in
the endpoint's deliveries log and the list. Then each webhooks page on a 375 px phone: nothing
scrolls sideways and nothing is logged to the console."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import psycopg
import pytest
from selenium.webdriver.common.by import By

from memvault.api import NamespaceAPI
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.webhooks.schemas import WebhookIn
from tests.browser.conftest import PHONE, console_errors, overflow, serve
from tests.browser.test_dashboard_journey import Mailbox, Site, fill, open_page, sign_in, submit, wider_than_the_screen
from tests.conftest import make_tenant
from tests.dashboard.conftest import PASSWORD, add_member
from tests.db.conftest import conninfo
from tests.servers import served_on_thread
from tests.webhooks.delivery.conftest import Receiver

WAIT_S = 20


async def test_a_delivery_to_a_real_receiver_shows_in_the_log(
    settings: Settings, pg_urls: DatabaseUrls, wide: Any, api: NamespaceAPI
) -> None:
    driver = wide
    tenant = await make_tenant(api, "hooks")
    owner = await add_member(api, tenant, "owner")
    receiver = Receiver("whsec_unknown_until_the_page_shows_it")
    # Both on threads of their own: selenium's calls block this test's event loop. The app runs a
    # delivery sender in its process (no Redis); the commit's NOTIFY wakes it, the sweep is slow.
    with (
        served_on_thread(receiver) as receiver_url,
        serve(settings, pg_urls, redis_url=None, webhook_allow_private=True, webhook_sweep_interval_s=60) as url,
    ):
        site = Site(url, Mailbox())
        sign_in(driver, site, owner, PASSWORD)
        open_page(driver, site, "/dashboard/webhooks")
        assert driver.find_element(By.ID, "nav-webhooks").get_attribute("aria-current") == "page"
        fill(
            driver,
            {
                "hook-url": f"{receiver_url}/memvault",
                "hook-namespaces": tenant.namespace,
                "hook-description": "the test's receiver",
            },
        )
        assert driver.find_element(By.ID, "event-memory-created").is_selected()  # the default
        secret = submit(driver, "create-webhook-submit", "new-secret").text.strip()
        assert secret.startswith("whsec_") and driver.find_elements(By.ID, "copy-secret")
        receiver.secret = secret
        submit(driver, "to-endpoint", "no-deliveries")
        endpoint_path = driver.current_url.removeprefix(url)

        async with httpx.AsyncClient(base_url=url, headers=tenant.headers, timeout=60) as rest:
            r = await rest.post(f"/v1/namespaces/{tenant.namespace}/memories", json={"content": "Sam likes tea"})
            assert r.status_code == 201, r.text
            memory_id = r.json()["id"]
        for _ in range(WAIT_S * 10):
            if receiver.received:
                break
            await asyncio.sleep(0.1)
        [event] = receiver.received  # its signature verified against the secret the page showed
        assert event["type"] == "memory.created" and event["data"]["id"] == memory_id

        # The log shows it as sent once the sender has written the outcome down.
        row = None
        for _ in range(WAIT_S * 2):
            open_page(driver, site, endpoint_path)
            rows = driver.find_elements(By.CSS_SELECTOR, "#deliveries tbody tr")
            if rows and "succeeded" in rows[0].text:
                row = rows[0]
                break
            await asyncio.sleep(0.5)
        assert row is not None, "the delivery never showed as succeeded"
        cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
        assert "memory.created" in cells[0] and event["id"] in cells[0]
        assert cells[1] == "succeeded" and cells[2] == "1" and cells[3] == "200" and cells[4].endswith(" ms")
        row.find_element(By.TAG_NAME, "summary").click()  # the receiver's answer, opened
        assert row.find_element(By.TAG_NAME, "pre").text == "ok"

        open_page(driver, site, "/dashboard/webhooks")
        last = driver.find_element(By.CSS_SELECTOR, "#webhooks td.hook-last").text
        assert "succeeded · 200" in last and "memory.created" in last
        assert secret not in driver.page_source
        assert console_errors(driver) == []


@pytest.fixture
async def phone_pages(site: str, api: NamespaceAPI, pg_urls: DatabaseUrls) -> tuple[str, str, str]:
    """An owner of a tenant with one endpoint (a long URL) and a log of long answers: (the site's
    URL, the owner's email, the endpoint's id)."""
    tenant = await make_tenant(api, "phone-hooks")
    owner = await add_member(api, tenant, "owner")
    url = "https://receiver.example.com/" + "a-long-path-segment/" * 8 + "?token=" + "x" * 60
    made = await api.create_webhook(
        tenant.principal,
        WebhookIn(url=url, events=["memory.created", "memory.updated", "memory.deleted"], description="phone"),
    )
    async with await psycopg.AsyncConnection.connect(conninfo(pg_urls.owner), autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO webhook_deliveries (tenant_id, endpoint_id, message_id, event_type, namespace, payload, "
            "status, attempts, response_status, response_excerpt, latency_ms, error, last_attempt_at) "
            "SELECT %s, %s, 'msg_' || md5(i::text), 'memory.created', %s, '{}', "
            "CASE WHEN i %% 2 = 0 THEN 'succeeded' ELSE 'failed' END, i, 500, repeat('<p>busy</p>', 90), 12, "
            "CASE WHEN i %% 2 = 0 THEN NULL ELSE 'HTTP 500: ' || repeat('overloaded ', 20) END, now() "
            "FROM generate_series(1, 5) i",
            (tenant.id, made.id, tenant.namespace),
        )
    return site, owner, str(made.id)


# Each page, and an element only that page has (so an error page cannot pass for it).
PHONE_PAGES = {"": "webhooks", "/{id}": "deliveries", "/{id}/edit": "edit-webhook", "/{id}/delete": "confirm-delete"}


@pytest.mark.parametrize("page", [*PHONE_PAGES, "secret"])
def test_every_webhooks_page_fits_a_375px_phone(page: str, phone: Any, phone_pages: tuple[str, str, str]) -> None:
    url, owner, endpoint_id = phone_pages
    site = Site(url, Mailbox())
    sign_in(phone, site, owner, PASSWORD)
    if page == "secret":  # the answer to the form: made here, as a person would on a phone
        phone.get(f"{url}/dashboard/webhooks")
        fill(phone, {"hook-url": f"https://receiver.example.com/{uuid.uuid4().hex}"})
        submit(phone, "create-webhook-submit", "new-secret")
    else:
        phone.get(f"{url}/dashboard/webhooks{page.replace('{id}', endpoint_id)}")
        assert phone.find_elements(By.ID, PHONE_PAGES[page]), phone.page_source[:500]
    assert phone.execute_script("return window.innerWidth") == PHONE, wider_than_the_screen(phone)
    assert overflow(phone) == 0, f"{page or 'the list'} scrolls sideways on a phone: {wider_than_the_screen(phone)}"
    assert console_errors(phone) == []
