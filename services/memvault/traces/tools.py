"""MCP tools for reasoning traces: record how a task was done, so it can be done again."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from memvault.mcp.runtime import Runtime
from memvault.memories.tools import WRITE, Namespace, SessionId, UserId
from memvault.traces.schemas import TraceCompleteIn, TraceIn, TraceOut, TraceStepIn, TraceStepOut


def register(server: MCPServer, rt: Runtime, *, extended: bool) -> None:
    if not extended:
        return

    @server.tool(
        name="trace_start",
        title="Start a trace",
        annotations=WRITE,
        description=(
            "Start recording how you work on a multi-step task (returns the trace id). Record steps with "
            "trace_step and finish with trace_complete; later, similar tasks can reuse what worked."
        ),
    )
    async def trace_start(
        ctx: Context,
        task: Annotated[str, Field(description="What you set out to do.")],
        user_id: UserId = None,
        agent_id: str | None = None,
        session_id: SessionId = None,
        namespace: Namespace = None,
    ) -> TraceOut:
        p = rt.principal(ctx)

        async def run() -> TraceOut:
            body = TraceIn(task=task, user_id=user_id, agent_id=agent_id, session_id=session_id)
            return await rt.api().start_trace(p, rt.namespace(p, namespace), body)

        return await rt.call(run)

    @server.tool(
        name="trace_step",
        title="Record a step",
        annotations=WRITE,
        description="Record one step of a trace: your thought, the action, what you observed, or a tool call.",
    )
    async def trace_step(
        ctx: Context,
        trace_id: uuid.UUID,
        thought: str | None = None,
        action: str | None = None,
        observation: str | None = None,
        tool_name: str | None = None,
        tool_args: dict[str, Any] | None = None,
        tool_result: Any = None,
        namespace: Namespace = None,
    ) -> TraceStepOut:
        p = rt.principal(ctx)

        async def run() -> TraceStepOut:
            body = TraceStepIn(
                thought=thought,
                action=action,
                observation=observation,
                tool_name=tool_name,
                tool_args=tool_args,
                tool_result=tool_result,
            )
            return await rt.api().add_trace_step(p, rt.namespace(p, namespace), trace_id, body)

        return await rt.call(run)

    @server.tool(
        name="trace_complete",
        title="Complete a trace",
        annotations=WRITE,
        description="Finish a trace with its outcome and whether it succeeded.",
    )
    async def trace_complete(
        ctx: Context, trace_id: uuid.UUID, outcome: str, success: bool, namespace: Namespace = None
    ) -> TraceOut:
        p = rt.principal(ctx)

        async def run() -> TraceOut:
            body = TraceCompleteIn(outcome=outcome, success=success)
            return await rt.api().complete_trace(p, rt.namespace(p, namespace), trace_id, body)

        return await rt.call(run)
