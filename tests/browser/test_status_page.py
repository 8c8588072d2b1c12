"""The public status page as a person sees it, in headless Chromium: every component with its
state, 90 uptime bars with the degraded days, the degraded periods, no sideways scrolling on a
375 px phone, nothing in the console, and Redis shown down while the app cannot reach it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from selenium.webdriver.common.by import By

from memvault.api import NamespaceAPI
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.status import repository as repo
from tests.browser.conftest import PHONE, console_errors, overflow, serve
from tests.servers import free_port


def components(driver: Any) -> dict[str, str]:
    """Each component's name and state, as the page shows them."""
    return {
        li.find_element(By.CLASS_NAME, "name").text: li.find_element(By.CLASS_NAME, "state").text
        for li in driver.find_elements(By.CSS_SELECTOR, "li.component")
    }


async def test_every_component_the_90_bars_and_a_degraded_period(site: str, wide: Any, api: NamespaceAPI) -> None:
    # Three minutes 30 days ago when Redis and the workers were away, beside normal ones.
    day = (datetime.now(UTC) - timedelta(days=30)).replace(hour=8, minute=0, second=0, microsecond=0)
    async with api._db.unscoped() as s:
        await repo.add_sample(s, day - timedelta(minutes=1), "operational", [])
        for i in range(3):
            await repo.add_sample(s, day + timedelta(minutes=i), "degraded", ["redis", "workers"])
    wide.get(f"{site}/status")

    assert wide.find_element(By.TAG_NAME, "h1").text == "Service status"
    assert wide.find_element(By.ID, "overall").text == "All systems operational"
    assert components(wide) == {
        "API": "Operational",
        "PostgreSQL": "Operational",
        "In-process jobs": "Operational",
        "Background workers": "Operational",
        "Embedding model": "Operational",
    }
    assert "all-MiniLM-L6-v2" in wide.find_element(By.ID, "component-embedding_model").text
    bars = wide.find_elements(By.CSS_SELECTOR, "svg.uptime rect")
    assert len(bars) == 90
    assert all(bar.size["width"] > 0 and bar.size["height"] > 0 for bar in bars)
    assert bars[59].get_attribute("class") == "day degraded"  # 30 days before today, the 90th
    periods = [li.text for li in wide.find_elements(By.CSS_SELECTOR, "ol.periods li")]
    assert any("3 min: Degraded (Redis, Background workers)" in p for p in periods), periods
    # Latency per door, for the last hour and the last day.
    for window in ("hour", "day"):
        rows = wide.find_elements(By.CSS_SELECTOR, f"#latency-{window} tbody th")
        assert [r.text for r in rows] == ["REST", "MCP", "SDK"]
    assert console_errors(wide) == []
    # The stylesheet applied (served by the app, allowed by the policy): the banner is green.
    colour = wide.find_element(By.ID, "overall").value_of_css_property("background-color")
    assert colour == "rgba(46, 133, 64, 1)"

    async with httpx.AsyncClient() as http:
        r = await http.get(f"{site}/status")
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "style-src 'self'" in csp and "script-src" not in csp


def test_a_375px_phone_scrolls_nothing_sideways(site: str, phone: Any) -> None:
    phone.get(f"{site}/status")
    assert phone.execute_script("return window.innerWidth") == PHONE
    assert phone.execute_script("return document.scrollingElement.scrollWidth") <= PHONE
    assert overflow(phone) <= 0
    # Everything still there, within the screen.
    assert len(components(phone)) == 5
    for element in phone.find_elements(By.CSS_SELECTOR, "li.component, table.latency, svg.uptime"):
        assert element.rect["x"] >= 0 and element.rect["x"] + element.rect["width"] <= PHONE
    assert console_errors(phone) == []


def test_redis_unreachable_shows_degraded(settings: Settings, pg_urls: DatabaseUrls, wide: Any) -> None:
    # A second app pointed at a closed loopback port: the machine's Redis keeps running.
    with serve(settings, pg_urls, redis_url=f"redis://127.0.0.1:{free_port()}/0") as url:
        wide.get(f"{url}/status")
        assert wide.find_element(By.ID, "overall").text == "Some systems degraded"
        seen = components(wide)
    assert seen["Redis"] == "Down" and seen["PostgreSQL"] == "Operational" and seen["API"] == "Operational"
    assert console_errors(wide) == []
