"""`memvault mcp` over stdio through the SDK's own stdio client: locally against the database,
and as a bridge to the HTTP endpoint. Nothing but protocol may reach stdout, or the client
would fail to parse it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from memvault.config import Settings
from tests.conftest import Tenant
from tests.mcp.conftest import call, fails

MEMVAULT = str(Path(sys.executable).with_name("memvault"))


@asynccontextmanager
async def stdio_session(args: list[str], env: dict[str, str]) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=MEMVAULT, args=["mcp", *args], env={**os.environ, **env})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@pytest.mark.slow
class TestStdio:
    async def test_local_mode_runs_the_tools_as_the_key(self, settings: Settings, tenant_a: Tenant) -> None:
        env = {
            "MEMVAULT_DATABASE_URL": str(settings.database_url),
            "MEMVAULT_API_KEY": tenant_a.key,
            "HF_HUB_OFFLINE": "1",
            "MEMVAULT_LOG_LEVEL": "WARNING",
        }
        async with stdio_session(["--profile", "core"], env) as s:
            tools = {t.name for t in (await s.list_tools()).tools}
            assert tools == {"memory_store", "memory_search", "memory_get_context", "memory_forget", "memory_status"}
            stored = await call(s, "memory_store", content="The staging password rotates monthly")
            # As the key: its tenant's status (a write no longer hands back its `created_by`).
            assert (await call(s, "memory_status"))["tenant_id"] == str(tenant_a.id)
            found = await call(s, "memory_search", query="how often is the staging password changed")
            assert found["results"][0]["id"] == stored["id"]

    async def test_bridge_mode_forwards_to_the_http_endpoint(
        self,
        base_url: str,
        tenant_b: Tenant,
    ) -> None:
        env: dict[str, Any] = {"MEMVAULT_API_KEY": tenant_b.key, "MEMVAULT_LOG_LEVEL": "WARNING"}
        async with stdio_session(["--url", f"{base_url}/mcp", "--profile", "extended"], env) as s:
            assert "memory_account" in {t.name for t in (await s.list_tools()).tools}
            status = await call(s, "memory_status")
            assert status["tenant_id"] == str(tenant_b.id)
            # The remote cannot see this machine's project; the bridge, launched in it, fills that in.
            assert set(status["rules"]) == {"CLAUDE.md", "AGENTS.md", ".cursor/rules/memvault.mdc"}
            assert set((await call(s, "memory_setup"))["installed"]) == set(status["rules"])
            stored = await call(s, "memory_store", content="Bridged memories land in the remote tenant")
            assert stored["namespace"] == "default"
            error = await fails(s, "memory_get", memory_id="00000000-0000-4000-8000-000000000000")
            assert "memory_not_found" in error
            prompts = await s.list_prompts()
            assert {p.name for p in prompts.prompts} == {
                "memory-conversation",
                "memory-review",
                "memory-reasoning",
                "memory-setup",
            }

    def test_bridge_needs_a_key(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "MEMVAULT_API_KEY"}
        done = subprocess.run(
            [MEMVAULT, "mcp", "--url", "http://127.0.0.1:9/mcp"], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2 and "MEMVAULT_API_KEY" in done.stderr and done.stdout == ""

    async def test_bridge_serves_the_profile_asked_for(self, base_url: str, tenant_b: Tenant) -> None:
        env: dict[str, Any] = {"MEMVAULT_API_KEY": tenant_b.key, "MEMVAULT_LOG_LEVEL": "WARNING"}
        core = {"memory_store", "memory_search", "memory_get_context", "memory_forget", "memory_status"}
        # --profile wins over the URL's own; without it the URL's applies (plain /mcp: the default).
        for args, expected in (
            (["--url", f"{base_url}/mcp/extended", "--profile", "core"], core),
            (["--url", f"{base_url}/mcp"], core),
        ):
            async with stdio_session(args, env) as s:
                assert {t.name for t in (await s.list_tools()).tools} == expected, args
        async with stdio_session(["--url", f"{base_url}/mcp/extended"], env) as s:
            assert "memory_account" in {t.name for t in (await s.list_tools()).tools}

    async def test_a_refused_key_is_one_readable_line(self, base_url: str) -> None:
        rc, out, err = await bridge(f"{base_url}/mcp", "mv_" + "x" * 40)
        assert rc != 0 and out == "" and "Traceback" not in err
        assert err.strip().count("\n") == 0, err
        assert "refused the key in MEMVAULT_API_KEY" in err and "401" in err and "invalid" in err

    async def test_an_unreachable_url_is_one_readable_line(self) -> None:
        rc, out, err = await bridge("http://127.0.0.1:9/mcp", "mv_" + "x" * 40)
        assert rc != 0 and out == "" and "Traceback" not in err
        assert err.strip().count("\n") == 0, err
        assert err.startswith("memvault mcp: cannot reach http://127.0.0.1:9/mcp")


async def bridge(url: str, key: str) -> tuple[int, str, str]:
    """`memvault mcp --url` as a person runs it, with nothing on stdin; the test's event loop keeps
    serving the endpoint meanwhile."""
    env = {**os.environ, "MEMVAULT_API_KEY": key, "MEMVAULT_LOG_LEVEL": "WARNING"}
    proc = await asyncio.create_subprocess_exec(
        MEMVAULT,
        "mcp",
        "--url",
        url,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
