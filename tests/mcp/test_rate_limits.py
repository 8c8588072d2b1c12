"""The MCP door under a plan's rate limits, with the real MCP client over HTTP: a tool call over
the limit is a tool error naming the code and the seconds to wait, and an address sending bad
credentials is refused with HTTP 429 before any tool runs."""

from __future__ import annotations

import re

import httpx

from memvault.api import NamespaceAPI
from tests.conftest import make_tenant
from tests.mcp.conftest import call, fails, mcp_session


async def test_a_tool_call_over_the_limit_names_the_code_and_the_wait(base_url: str, api: NamespaceAPI) -> None:
    t = await make_tenant(api, "mcp-rl")
    await api.set_tenant_plan(t.id, "unlimited", {"key_searches_per_minute": 2})
    async with mcp_session(base_url, t.key) as s:
        for _ in range(2):
            await call(s, "memory_search", query="window seats")
        text = await fails(s, "memory_search", query="window seats")
        assert text.startswith("rate_limited: "), text
        wait = re.search(r"retry in (\d+) s", text)
        assert wait is not None and 1 <= int(wait.group(1)) <= 60, text
        # Another kind is counted apart: reads are not limited by this plan.
        await call(s, "memory_list")


async def test_bad_credentials_at_mcp_are_refused_with_429_before_a_tool_runs(base_url: str, api: NamespaceAPI) -> None:
    t = await make_tenant(api, "mcp-badkey")
    limit = int(api._settings.bad_credentials_limit_per_address.split("/")[0])
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=base_url) as http:
        for _ in range(limit):
            r = await http.post("/mcp", json=ping, headers={**headers, "Authorization": "Bearer mv_" + "y" * 40})
            assert r.status_code == 401
        r = await http.post("/mcp", json=ping, headers={**headers, "Authorization": "Bearer not-a-token"})
        assert r.status_code == 429 and r.json()["code"] == "rate_limited" and int(r.headers["retry-after"]) >= 1
    async with mcp_session(base_url, t.key) as s:  # the owner of a real key, same address: served
        await call(s, "memory_list")
