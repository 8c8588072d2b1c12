from __future__ import annotations

from typing import Any

from memvault_sdk._base import APIRequest, body, params, segment
from memvault_sdk.pagination import AsyncPaginator, SyncPage
from memvault_sdk.resources._resource import AsyncAPIResource, SyncAPIResource
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


class Traces(SyncAPIResource):
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
    ) -> Trace:
        """Start a reasoning trace for a task; record steps, then complete it."""
        payload = body(
            TraceCreate, task=task, user_id=user_id, agent_id=agent_id, session_id=session_id, metadata=metadata
        )
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/traces",
            json=payload,
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return self._call(req, Trace)

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
    ) -> TraceStep:
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
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/traces/{segment(trace_id)}/steps",
            json=payload,
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return self._call(req, TraceStep)

    def complete(
        self,
        trace_id: str,
        *,
        outcome: str,
        success: bool,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> Trace:
        """Close a trace with its outcome and whether it succeeded."""
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/traces/{segment(trace_id)}/complete",
            json=body(TraceComplete, outcome=outcome, success=success),
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return self._call(req, Trace)

    def get(self, trace_id: str, *, namespace: str | None = None) -> TraceDetail:
        """One trace with every step in order."""
        return self._call(APIRequest("GET", f"{self._ns(namespace)}/traces/{segment(trace_id)}"), TraceDetail)

    def list(
        self,
        *,
        status: TraceStatus | None = None,
        success: bool | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        limit: int | None = None,
        namespace: str | None = None,
    ) -> SyncPage[Trace]:
        """Traces newest first, without their steps."""
        query = params(status=status, success=success, user_id=user_id, agent_id=agent_id, limit=limit)
        return self._page(APIRequest("GET", f"{self._ns(namespace)}/traces", params=query), Trace)

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
    ) -> TraceSearchResponse:
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
        req = APIRequest("POST", f"{self._ns(namespace)}/traces/search", json=payload)
        return self._call(req, TraceSearchResponse)

    def delete(self, trace_id: str, *, namespace: str | None = None) -> None:
        """Delete a trace and its steps for good."""
        self._call(APIRequest("DELETE", f"{self._ns(namespace)}/traces/{segment(trace_id)}"), None)


class AsyncTraces(AsyncAPIResource):
    async def start(
        self,
        task: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> Trace:
        """Start a reasoning trace for a task; record steps, then complete it."""
        payload = body(
            TraceCreate, task=task, user_id=user_id, agent_id=agent_id, session_id=session_id, metadata=metadata
        )
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/traces",
            json=payload,
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return await self._call(req, Trace)

    async def step(
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
    ) -> TraceStep:
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
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/traces/{segment(trace_id)}/steps",
            json=payload,
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return await self._call(req, TraceStep)

    async def complete(
        self,
        trace_id: str,
        *,
        outcome: str,
        success: bool,
        namespace: str | None = None,
        idempotency_key: str | None = None,
    ) -> Trace:
        """Close a trace with its outcome and whether it succeeded."""
        req = APIRequest(
            "POST",
            f"{self._ns(namespace)}/traces/{segment(trace_id)}/complete",
            json=body(TraceComplete, outcome=outcome, success=success),
            idempotent_write=True,
            idempotency_key=idempotency_key,
        )
        return await self._call(req, Trace)

    async def get(self, trace_id: str, *, namespace: str | None = None) -> TraceDetail:
        """One trace with every step in order."""
        return await self._call(APIRequest("GET", f"{self._ns(namespace)}/traces/{segment(trace_id)}"), TraceDetail)

    def list(
        self,
        *,
        status: TraceStatus | None = None,
        success: bool | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        limit: int | None = None,
        namespace: str | None = None,
    ) -> AsyncPaginator[Trace]:
        """Traces newest first, without their steps."""
        query = params(status=status, success=success, user_id=user_id, agent_id=agent_id, limit=limit)
        return self._page(APIRequest("GET", f"{self._ns(namespace)}/traces", params=query), Trace)

    async def search(
        self,
        query: str,
        *,
        limit: int | None = None,
        success: bool | None = None,
        status: TraceStatus | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
    ) -> TraceSearchResponse:
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
        req = APIRequest("POST", f"{self._ns(namespace)}/traces/search", json=payload)
        return await self._call(req, TraceSearchResponse)

    async def delete(self, trace_id: str, *, namespace: str | None = None) -> None:
        """Delete a trace and its steps for good."""
        await self._call(APIRequest("DELETE", f"{self._ns(namespace)}/traces/{segment(trace_id)}"), None)
