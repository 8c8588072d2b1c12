"""Refresh the pictures of memvault's pages in docs/images/: each page opened in headless Chromium
(Debian's chromium and chromium-driver, as tests/browser uses them) and saved as a PNG as tall as
the page: the status page 1024 px wide, every account dashboard page at 1280 and at 375 px (a
phone) as dashboard-<page>-<width>.png.

    python infra/scripts/screenshots.py                 # starts `memvault serve` (embedded, no Redis)
    python infra/scripts/screenshots.py --url http://127.0.0.1:8080 --email E   # a server already running

Without --url the server runs on a free loopback port with a throwaway data folder, and is stopped
again (its whole process group) when the pictures are taken. Before it starts, a small dashboard
tenant is seeded into that folder (loadtests/dashboard_seed.py: memories, keys, members, apps,
jobs, usage), and Chromium signs in as its owner. The dashboard's pages are its GET routes as the
app has them (loadtests/bench_dashboard.py finds them the same way), so a new page is photographed
with nobody listing it; with --url, pages that need an id of the seeded tenant are left out.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "loadtests"))  # the dashboard tenant's seed and page list

IMAGES = ROOT / "docs" / "images"
# Page name (the PNG's) -> path, shot at WIDTH; the dashboard's are found in the app (dashboard_pages).
PAGES = {"status": "/status"}
WIDTH = 1024
DASHBOARD_WIDTHS = (1280, 375)
# A small tenant: every page has rows to show, and seeding it takes a minute, not an hour.
MEMORIES, SENTENCES = 400, 200


@dataclass(frozen=True)
class Shot:
    name: str  # the PNG's, without the width
    path: str  # with its query
    widths: tuple[int, ...] = (WIDTH,)
    signed_in: bool = False


def dashboard_pages(seeded: Any | None) -> list[Shot]:
    """Every dashboard GET page; without ``seeded`` (a server of someone else's), those whose path
    needs an id are left out."""
    from urllib.parse import urlencode

    from bench_dashboard import pages_of
    from scenarios.texts import corpus

    from memvault.app import create_app
    from memvault.config import Settings

    ids = seeded or _NoIds()
    shots = []
    for page in pages_of(create_app(Settings(_env_file=None)), ids):
        if "{" in page.path:
            print(f"left out {page.label}: it needs the seeded tenant's ids", file=sys.stderr)
            continue
        if page.path.endswith(".csv"):  # a download, not a page
            continue
        params = dict(page.params)
        if page.searches:
            params.update({"q": corpus().questions[0], "query": corpus().questions[0]})
        route = page.label.removesuffix("?q=…").removeprefix("/dashboard").strip("/")
        name = "dashboard-" + (route.replace("{", "").replace("}", "").replace("/", "-") or "overview")
        name += "-search" if page.searches else ""
        path = page.path + (f"?{urlencode(params)}" if params else "")
        shots.append(Shot(name, path, DASHBOARD_WIDTHS, signed_in=not page.anonymous))
    return shots


class _NoIds:
    """Stands in for the seed's ids on a server the script did not seed: each is left a
    parameter (and the page left out), the namespace is the default one."""

    namespace = "default"

    def __getattr__(self, name: str) -> str:
        return "{" + name + "}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _seed(folder: Path) -> Any:
    """The small dashboard tenant, seeded into the data folder `memvault serve` then runs on."""
    import asyncio

    from bench_dashboard import prepared

    return asyncio.run(prepared(folder, MEMORIES, SENTENCES))


@contextlib.contextmanager
def _served() -> Iterator[tuple[str, Any]]:
    """A server on a throwaway data folder with the small dashboard tenant; (its URL, the seed)."""
    port = _free_port()
    memvault = Path(sys.executable).parent / "memvault"
    cmd = [str(memvault)] if memvault.exists() else [sys.executable, "-m", "memvault.cli"]
    env = {k: v for k, v in os.environ.items() if k not in ("MEMVAULT_REDIS_URL", "MEMVAULT_DATABASE_URL")}
    env.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="memvault-screens-") as data:
        seeded = _seed(Path(data) / "db")
        log = open(Path(data) / "serve.log", "wb")  # noqa: SIM115 - closed below, after the server
        proc = subprocess.Popen(
            [*cmd, "serve", "--data-dir", str(Path(data) / "db"), "--port", str(port), "--workers", "1"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 300
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"memvault serve exited; see {log.name}:\n" + Path(log.name).read_text()[-2000:])
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise SystemExit("memvault serve did not become ready in 5 minutes")
                time.sleep(0.5)
            time.sleep(2)  # the first health sample, taken as the server starts
            yield url, seeded
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            log.close()


def _sign_in(driver: Any, url: str, email: str, password: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url + "/dashboard/signin")
    driver.find_element(By.ID, "email").send_keys(email)
    driver.find_element(By.ID, "password").send_keys(password)
    driver.find_element(By.ID, "signin").click()
    WebDriverWait(driver, 30).until(lambda d: "/dashboard/signin" not in d.current_url)


def shoot(url: str, shots: list[Shot], out: Path, credentials: tuple[str, str] | None) -> list[Path]:
    """Each shot at each of its widths; the anonymous ones first, then signed in (``credentials``)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        f"--window-size={WIDTH},800",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(executable_path="/usr/bin/chromedriver"))
    saved = []
    signed_in = False
    try:
        for shot in sorted(shots, key=lambda s: s.signed_in):
            if shot.signed_in and not signed_in:
                if credentials is None:
                    print(f"left out {shot.name}: no --email/--password to sign in with", file=sys.stderr)
                    continue
                _sign_in(driver, url, *credentials)
                signed_in = True
            for width in shot.widths:
                driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
                driver.set_window_size(width, 800)
                driver.get(url + shot.path)
                height = int(driver.execute_script("return document.scrollingElement.scrollHeight"))
                driver.execute_cdp_cmd(
                    "Emulation.setDeviceMetricsOverride",
                    {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
                )
                suffix = f"-{width}" if shot.widths != (WIDTH,) else ""
                target = out / f"{shot.name}{suffix}.png"
                target.write_bytes(driver.get_screenshot_as_png())
                saved.append(target)
    finally:
        driver.quit()
    return saved


def _smaller(path: Path) -> None:
    """Fewer colours (the pages have a handful): a fraction of the bytes, no visible change."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a memvault already running (default: start one)")
    parser.add_argument("--email", help="with --url: a member to sign in to the dashboard as")
    parser.add_argument(
        "--password", default=os.environ.get("MEMVAULT_SCREENSHOTS_PASSWORD"),
        help="with --url: their password (default: $MEMVAULT_SCREENSHOTS_PASSWORD)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=IMAGES)
    parser.add_argument(
        "pages", nargs="*", help="pages to refresh by name (status, dashboard-overview, ...; default all)"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with contextlib.nullcontext((args.url.rstrip("/"), None)) if args.url else _served() as (url, seeded):
        shots = [Shot(name, path) for name, path in PAGES.items()] + dashboard_pages(seeded)
        if args.pages:
            unknown = sorted(set(args.pages) - {s.name for s in shots})
            if unknown:
                raise SystemExit(f"no page named {', '.join(unknown)}; there are {', '.join(s.name for s in shots)}")
            shots = [s for s in shots if s.name in args.pages]
        if seeded is not None:
            credentials: tuple[str, str] | None = (seeded.email, seeded.password)
        else:
            credentials = (args.email, args.password) if args.email and args.password else None
        for path in shoot(url, shots, args.out, credentials):
            _smaller(path)
            print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
