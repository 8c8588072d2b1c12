"""SLOW (30 s, minutes on a loaded machine): two real `memvault serve` processes on one PostgreSQL
and one Redis count one limit together: a key's searches through either server add up, and the
429 comes from whichever server the request past the limit reaches."""

from __future__ import annotations

import asyncio
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


async def test_two_server_processes_hold_one_monthly_cap_between_writers_at_once(
    api: NamespaceAPI, two_servers: list[str]
) -> None:
    """30 ingests at once, half through each server, against a cap of 10 events a month: exactly
    10 are stored, whichever server they reached, and both servers' accounts agree."""
    t = await make_tenant(api, "two-procs-month")
    await api.set_tenant_plan(t.id, "unlimited", {"events_per_month": 10})
    path = f"/v1/namespaces/{t.namespace}/events"
    async with httpx.AsyncClient(timeout=60) as http:

        async def ingest(i: int) -> httpx.Response:
            body = {"session_id": f"s{i}", "messages": [{"role": "user", "content": f"note {i}"}]}
            return await http.post(f"{two_servers[i % 2]}{path}", json=body, headers=t.headers)

        answers = await asyncio.gather(*(ingest(i) for i in range(30)))
        codes = sorted("stored" if r.is_success else str(r.status_code) for r in answers)
        assert codes == ["429"] * 20 + ["stored"] * 10, codes
        refused = next(r for r in answers if r.status_code == 429).json()
        assert (refused["code"], refused["quota"], refused["limit"]) == ("quota_exceeded", "events_per_month", 10)
        for base in two_servers:
            r = await http.get(f"{base}/v1/account", headers=t.headers)
            quotas = {q["quota"]: q for q in r.json()["quotas"]}
            assert quotas["events_per_month"]["used"] == 10, base
        sessions = (await http.get(f"{two_servers[0]}/v1/namespaces/{t.namespace}/sessions", headers=t.headers)).json()
        assert len(sessions["data"]) == 10
