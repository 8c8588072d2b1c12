"""MCP tools for reasoning traces: record how a task was done, so it can be done again."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from memvault.mcp.runtime import Runtime
from memvault.mcp.tool import ToolCall, Tools
from memvault.memories.tools import WRITE, Namespace, SessionId, UserId
from memvault.traces.schemas import TraceCompleteIn, TraceIn, TraceOut, TraceStepIn, TraceStepOut


def register(server: MCPServer, rt: Runtime, *, extended: bool) -> None:
    tool = Tools(server, rt)
    if not extended:
        return

    @tool(
        name="trace_start",
        title="Start a trace",
        annotations=WRITE,
        description=(
            "Start recording how you work on a multi-step task (returns the trace id). Record steps with "
            "trace_step and finish with trace_complete; later, similar tasks can reuse what worked."
        ),
    )
    async def trace_start(
        call: ToolCall,
        task: Annotated[str, Field(description="What you set out to do.")],
        user_id: UserId = None,
        agent_id: str | None = None,
        session_id: SessionId = None,
        namespace: Namespace = None,
    ) -> TraceOut:
        body = TraceIn(task=task, user_id=user_id, agent_id=agent_id, session_id=session_id)
        return await call.api.start_trace(call.p, call.ns(namespace), body)

    @tool(
        name="trace_step",
        title="Record a step",
        annotations=WRITE,
        description="Record one step of a trace: your thought, the action, what you observed, or a tool call.",
    )
    async def trace_step(
        call: ToolCall,
        trace_id: uuid.UUID,
        thought: str | None = None,
        action: str | None = None,
        observation: str | None = None,
        tool_name: str | None = None,
        tool_args: dict[str, Any] | None = None,
        tool_result: Any = None,
        namespace: Namespace = None,
    ) -> TraceStepOut:
        body = TraceStepIn(
            thought=thought,
            action=action,
            observation=observation,
            tool_name=tool_name,
            tool_args=tool_args,
            tool_result=tool_result,
        )
        return await call.api.add_trace_step(call.p, call.ns(namespace), trace_id, body)

    @tool(
        name="trace_complete",
        title="Complete a trace",
        annotations=WRITE,
        description="Finish a trace with its outcome and whether it succeeded.",
    )
    async def trace_complete(
        call: ToolCall, trace_id: uuid.UUID, outcome: str, success: bool, namespace: Namespace = None
    ) -> TraceOut:
        body = TraceCompleteIn(outcome=outcome, success=success)
        return await call.api.complete_trace(call.p, call.ns(namespace), trace_id, body)
