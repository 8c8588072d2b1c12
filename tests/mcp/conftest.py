"""MCP test fixtures: the session's app served by uvicorn on loopback, and client helpers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.servers import served


@pytest.fixture(scope="session")
async def base_url(app: Any) -> AsyncIterator[str]:
    """The session's app (its lifespan already running) served by uvicorn on loopback."""
    async with served(app) as url:
        yield url


@asynccontextmanager
async def mcp_session(base_url: str, key: str, path: str = "/mcp/extended") -> AsyncIterator[ClientSession]:
    """A client of ``path``: the extended profile unless a test asks for another (plain /mcp serves
    the core one)."""
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http,
        streamable_http_client(f"{base_url}{path}", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **args: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def fails(session: ClientSession, tool: str, **args: Any) -> str:
    """The error text after the SDK's `Error executing tool <name>: ` prefix: our `code: detail`."""
    result = await session.call_tool(tool, args)
    assert result.is_error, result
    text = result.content[0].text  # type: ignore[union-attr]
    assert "Traceback" not in text
    return text.removeprefix(f"Error executing tool {tool}: ")
