from __future__ import annotations

from typing import Any

from memvault_sdk._request import NOTHING, APIRequest, body, params, returns, segment
from memvault_sdk.pagination import PageData
from memvault_sdk.resources._resource import APIResource, AsyncAPIResource, SyncAPIResource, endpoint, paginated
from memvault_sdk.types.traces import (
    Trace,
    TraceComplete,
    TraceCreate,
    TraceDetail,
    TraceSearchParams,
    TraceSearchResponse,
    TraceStatus,
    TraceStep,
    TraceStepCreate,
)


class _Traces(APIResource):
    @endpoint
    def start(
        self,
        task: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> APIRequest[Trace]:
        """Start a reasoning trace for a task; record steps, then complete it."""
        payload = body(
            TraceCreate, task=task, user_id=user_id, agent_id=agent_id, session_id=session_id, metadata=metadata
        )
        path = f"{self._ns(namespace)}/traces"
        return APIRequest("POST", path, returns(Trace), body=payload, idempotency_key=idempotency_key)

    @endpoint
    def step(
        self,
        trace_id: str,
        *,
        thought: str | None = None,
        action: str | None = None,
        observation: str | None = None,
        tool_name: str | None = None,
        tool_args: Any = None,
        tool_result: Any = None,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> APIRequest[TraceStep]:
        """Record the next step of an open trace (at least one field)."""
        payload = body(
            TraceStepCreate,
            thought=thought,
            action=action,
            observation=observation,
            tool_name=tool_name,
            tool_args=tool_args,
            tool_result=tool_result,
        )
        path = f"{self._ns(namespace)}/traces/{segment(trace_id)}/steps"
        return APIRequest("POST", path, returns(TraceStep), body=payload, idempotency_key=idempotency_key)

    @endpoint
    def complete(
        self,
        trace_id: str,
        *,
        outcome: str,
        success: bool,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> APIRequest[Trace]:
        """Close a trace with its outcome and whether it succeeded."""
        payload = body(TraceComplete, outcome=outcome, success=success)
        path = f"{self._ns(namespace)}/traces/{segment(trace_id)}/complete"
        return APIRequest("POST", path, returns(Trace), body=payload, idempotency_key=idempotency_key)

    @endpoint
    def get(self, trace_id: str, *, namespace: str | None = None) -> APIRequest[TraceDetail]:
        """One trace with every step in order."""
        return APIRequest("GET", f"{self._ns(namespace)}/traces/{segment(trace_id)}", returns(TraceDetail))

    @paginated
    def list(
        self,
        *,
        status: TraceStatus | None = None,
        success: bool | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        limit: int | None = None,
        namespace: str | None = None,
    ) -> APIRequest[PageData[Trace]]:
        """Traces newest first, without their steps."""
        query = params(status=status, success=success, user_id=user_id, agent_id=agent_id, limit=limit)
        return APIRequest("GET", f"{self._ns(namespace)}/traces", returns(PageData[Trace]), params=query)

    @endpoint
    def search(
        self,
        query: str,
        *,
        limit: int | None = None,
        success: bool | None = None,
        status: TraceStatus | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
    ) -> APIRequest[TraceSearchResponse]:
        """Past traces for a similar task, each with its steps to replay; ``success=True`` for
        procedures that worked."""
        payload = body(
            TraceSearchParams,
            query=query,
            limit=limit,
            success=success,
            status=status,
            user_id=user_id,
            agent_id=agent_id,
        )
        path = f"{self._ns(namespace)}/traces/search"
        return APIRequest("POST", path, returns(TraceSearchResponse), body=payload, retry="read")

    @endpoint
    def delete(
        self, trace_id: str, *, namespace: str | None = None, idempotency_key: str | None = None
    ) -> APIRequest[None]:
        """Delete a trace and its steps for good."""
        path = f"{self._ns(namespace)}/traces/{segment(trace_id)}"
        return APIRequest("DELETE", path, NOTHING, idempotency_key=idempotency_key)


class Traces(_Traces, SyncAPIResource):
    pass


class AsyncTraces(_Traces, AsyncAPIResource):
    pass
