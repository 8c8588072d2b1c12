"""Refresh the pictures of memvault's pages in docs/images/: each page opened in headless Chromium
(Debian's chromium and chromium-driver, as tests/browser uses them) and saved as a PNG, 1024 px
wide and as tall as the page.

    python infra/scripts/screenshots.py                 # starts `memvault serve` (embedded, no Redis)
    python infra/scripts/screenshots.py --url http://127.0.0.1:8080   # a server already running

Without --url the server runs on a free loopback port with a throwaway data folder, and is stopped
again (its whole process group) when the pictures are taken.
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
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "docs" / "images"
# Page name (the PNG's) -> path. The account dashboard's pages join here.
PAGES = {"status": "/status"}
WIDTH = 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _served() -> Iterator[str]:
    port = _free_port()
    memvault = Path(sys.executable).parent / "memvault"
    cmd = [str(memvault)] if memvault.exists() else [sys.executable, "-m", "memvault.cli"]
    env = {k: v for k, v in os.environ.items() if k not in ("MEMVAULT_REDIS_URL", "MEMVAULT_DATABASE_URL")}
    env.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="memvault-screens-") as data:
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
            yield url
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            log.close()


def shoot(url: str, pages: dict[str, str], out: Path) -> list[Path]:
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
    try:
        for name, path in pages.items():
            driver.set_window_size(WIDTH, 800)
            driver.get(url + path)
            height = int(driver.execute_script("return document.scrollingElement.scrollHeight"))
            driver.execute_cdp_cmd(
                "Emulation.setDeviceMetricsOverride",
                {"width": WIDTH, "height": height, "deviceScaleFactor": 1, "mobile": False},
            )
            target = out / f"{name}.png"
            target.write_bytes(driver.get_screenshot_as_png())
            driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
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
    parser.add_argument("--out", type=Path, default=IMAGES)
    parser.add_argument("pages", nargs="*", help=f"pages to refresh (default all: {', '.join(PAGES)})")
    args = parser.parse_args()
    pages = {name: PAGES[name] for name in args.pages} if args.pages else PAGES
    args.out.mkdir(parents=True, exist_ok=True)
    with contextlib.nullcontext(args.url.rstrip("/")) if args.url else _served() as url:
        for path in shoot(url, pages, args.out):
            _smaller(path)
            print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
