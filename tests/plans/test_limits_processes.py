"""SLOW (30 s, minutes on a loaded machine): two real `memvault serve` processes on one PostgreSQL
and one Redis count one limit together: a key's searches through either server add up, and the
429 comes from whichever server the request past the limit reaches."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memvault.api import NamespaceAPI
from memvault.config import Settings
from tests.cli.test_cli import MEMVAULT, clean_env, free_port
from tests.conftest import make_tenant


@pytest.fixture
def two_servers(settings: Settings, redis_url: str, tmp_path: Path) -> Iterator[list[str]]:
    procs: list[subprocess.Popen[bytes]] = []
    bases: list[str] = []
    for n in range(2):
        port = free_port()
        env = clean_env(
            HF_HUB_OFFLINE="1",
            MEMVAULT_DATABASE_URL=str(settings.database_url),
            MEMVAULT_REDIS_URL=redis_url,
            MEMVAULT_DATA_DIR=str(tmp_path / f"data{n}"),
        )
        log = (tmp_path / f"serve{n}.log").open("wb")
        procs.append(
            subprocess.Popen(
                [str(MEMVAULT), "serve", "--workers", "1", "--port", str(port)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        bases.append(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 300
        for base, proc in zip(bases, procs, strict=True):
            while True:
                assert proc.poll() is None, (tmp_path / "serve0.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "memvault serve did not start"
                try:
                    if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.3)
        yield bases
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def test_two_server_processes_share_one_count(api: NamespaceAPI, two_servers: list[str]) -> None:
    t = await make_tenant(api, "two-procs")
    await api.set_tenant_plan(t.id, "unlimited", {"key_searches_per_minute": 5, "tenant_searches_per_minute": 50})
    one, two = two_servers
    path, body = f"/v1/namespaces/{t.namespace}/search", {"query": "window seats"}
    async with httpx.AsyncClient(timeout=30) as http:
        codes = []
        for base in (one, two, one, two, one, two, one):
            r = await http.post(f"{base}{path}", json=body, headers=t.headers)
            codes.append(r.status_code)
        assert codes == [200, 200, 200, 200, 200, 429, 429], codes
        assert r.json()["code"] == "rate_limited" and int(r.headers["retry-after"]) >= 1
        assert r.headers["ratelimit-policy"] == '"key-search";q=5;w=60'
