"""The tool list clients see, pinned byte for byte: names, titles, descriptions, annotations and
the input and output schemas of every tool, and which are in the core profile. A refactor of how
tools are declared must leave it unchanged; a deliberate change regenerates the snapshot
(`python -m tests.mcp.test_tool_list > tests/mcp/tool_list.json`) and shows in review."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from memvault.mcp.runtime import Runtime
from memvault.mcp.server import build_server

SNAPSHOT = Path(__file__).with_name("tool_list.json")


async def tool_list() -> dict[str, Any]:
    # The core profile is a subset of the same declarations: its names suffice.
    core = await build_server(Runtime(api=lambda: None), "core").list_tools()
    extended = await build_server(Runtime(api=lambda: None), "extended").list_tools()
    return {
        "core": [tool.name for tool in core],
        "extended": [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in extended],
    }


def render(tools: dict[str, Any]) -> str:
    return json.dumps(tools, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


async def test_the_tool_list_is_unchanged() -> None:
    assert render(await tool_list()) == SNAPSHOT.read_text(), "tool list changed; see this module's docstring"


if __name__ == "__main__":
    print(render(asyncio.run(tool_list())), end="")
