"""MCP tool for background jobs: what memory_ingest and memory_organize started, and how it went."""

from __future__ import annotations

import uuid
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from memvault.jobs.schemas import JobOut
from memvault.mcp.runtime import Runtime
from memvault.mcp.tool import ToolCall, Tools
from memvault.memories.tools import READ


def register(server: MCPServer, rt: Runtime, *, extended: bool) -> None:
    if not extended:
        return
    tool = Tools(server, rt)

    @tool(
        name="memory_job_status",
        title="Job status",
        annotations=READ,
        description=(
            "Progress and result of a background job by the job_id memory_ingest or memory_organize returned: "
            "status (queued, running, succeeded, failed, cancelled), progress 0..1, and once finished what it did "
            "(e.g. memories_created) or why it failed."
        ),
    )
    async def memory_job_status(
        call: ToolCall, job_id: Annotated[uuid.UUID, Field(description="The job id.")]
    ) -> JobOut:
        return await call.api.get_job(call.p, job_id)
