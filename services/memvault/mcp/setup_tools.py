"""The `memory_setup` tool: the rule block (mcp/setup.py) an agent keeps in its project's rule file."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

from memvault.mcp import setup
from memvault.mcp.runtime import Runtime
from memvault.mcp.tool import ToolCall, Tools
from memvault.memories.tools import READ


class SetupRules(BaseModel):
    block: str = Field(description="The text to keep in the rule file, markers included.")
    files: dict[str, str] = Field(description="The rule file of each client, relative to the project root.")
    opt_out: str = Field(description="A file holding this line is left alone.")
    installed: dict[str, str] | None = Field(
        description="Per rule file: installed, outdated, missing or opted_out; null when this server cannot see "
        "the project (over HTTP)."
    )


def register(server: MCPServer, rt: Runtime, *, extended: bool) -> None:
    if not extended:
        return
    tool = Tools(server, rt)

    @tool(
        name="memory_setup",
        title="Memory rules for this project",
        annotations=READ,
        description=(
            "The rule block to keep in the project's CLAUDE.md, AGENTS.md or .cursor/rules/memvault.mdc, so every "
            "session recalls and stores memory the same way. Put it in the file verbatim; if the file already has a "
            "block between the same markers, replace that block instead of adding a second one; leave a file "
            "holding the opt-out line alone. `memvault mcp setup` writes it from a terminal."
        ),
    )
    async def memory_setup(call: ToolCall) -> SetupRules:
        return SetupRules(
            block=setup.block(),
            files=dict(setup.TARGETS),
            opt_out=setup.OPT_OUT,
            installed=dict(setup.state(rt.project_dir)) if rt.project_dir is not None else None,
        )
