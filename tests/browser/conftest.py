"""The web pages in a real browser: Debian's Chromium, headless, driven through its chromedriver
by selenium, against the app served by uvicorn on loopback.

infra/scripts/test.sh installs chromium and chromium-driver and sets MEMVAULT_REQUIRE_BROWSER:
there (and wherever CI is set) a missing browser fails these tests; elsewhere they are skipped,
saying what to install.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from tests.servers import served_on_thread

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WIDE = 1280
PHONE = 375

pytestmark = pytest.mark.slow


def _missing() -> str | None:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        return f"{CHROMIUM} or {CHROMEDRIVER} is missing (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    return None


def _require_browser() -> None:
    missing = _missing()
    if missing is None:
        return
    if os.environ.get("CI") or os.environ.get("MEMVAULT_REQUIRE_BROWSER"):
        pytest.fail(f"browser tests must run here: {missing}")
    pytest.skip(f"no browser to test the pages in: {missing}")


def serve(settings: Settings, pg_urls: DatabaseUrls, *, port: int = 0, **overrides: Any) -> Any:
    """The app on a thread and event loop of its own (selenium blocks the test's loop), with an
    embedder of its own: the session's is bound to the session's loop."""
    embedder = LocalEmbedder("sentence-transformers/all-MiniLM-L6-v2", dim=384)
    app = create_app(settings.model_copy(update=overrides), urls=pg_urls, embedder=embedder)
    return served_on_thread(app, port)


@pytest.fixture(scope="session")
def site(settings: Settings, pg_urls: DatabaseUrls) -> Iterator[str]:
    """The app as the embedded default runs it: no Redis, jobs in the process. Its base URL."""
    _require_browser()
    with serve(settings, pg_urls, redis_url=None) as url:
        yield url


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the session, 1280 px wide, keeping the console's messages."""
    _require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={WIDE},900",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The system's chromedriver, named: selenium-manager would otherwise try to download one.
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def wide(browser: Any) -> Iterator[Any]:
    browser.get_log("browser")  # what earlier tests left in the console
    yield browser


@pytest.fixture
def phone(browser: Any) -> Iterator[Any]:
    """The browser as a 375 px wide phone (the viewport, as a phone's would be), for one test."""
    browser.get_log("browser")
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride", {"width": PHONE, "height": 800, "deviceScaleFactor": 2, "mobile": True}
    )
    try:
        yield browser
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def console_errors(driver: Any) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def overflow(driver: Any) -> int:
    """How far the page is wider than its viewport (0: nothing to scroll sideways)."""
    return int(driver.execute_script("return document.scrollingElement.scrollWidth - window.innerWidth"))
