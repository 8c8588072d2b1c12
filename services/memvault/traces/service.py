"""Reasoning traces as procedural memory: an agent starts a trace for a task, records its steps
(thought, action, observation, tool call), completes it with an outcome, and a later agent searches
past traces by task to replay what worked.

Steps are numbered by the database, not the caller: recording one increments the trace's step
count under its row lock, so concurrent steps never share a number and none lands after the trace
completed. The trace is embedded by its task when it starts and by task and outcome when it
completes; if the embedder is down then, the trace is still recorded (found by words until it is
embedded again), because losing an agent's record of its work is worse than a weaker search.
"""

from __future__ import annotations

import logging
import time
import uuid

from memvault.audit import repository as audit
from memvault.embeddings import EmbeddingUnavailable
from memvault.errors import Conflict, NotFound
from memvault.facade import FacadeBase
from memvault.operations import operation
from memvault.principal import Principal
from memvault.retrieval.schemas import Signals
from memvault.traces import repository as traces_repo
from memvault.traces.models import Trace, TraceStep
from memvault.traces.repository import TraceFilters
from memvault.traces.schemas import (
    MAX_STEPS,
    TraceCompleteIn,
    TraceDetail,
    TraceIn,
    TraceOut,
    TracePage,
    TraceSearchIn,
    TraceSearchMetrics,
    TraceSearchOut,
    TraceSearchResult,
    TraceStatus,
    TraceStepIn,
    TraceStepOut,
)

log = logging.getLogger(__name__)


class TraceNotFound(NotFound):
    code = "trace_not_found"
    title = "Trace not found"


class TraceCompleted(Conflict):
    code = "trace_completed"
    title = "Trace completed"


class TraceTooLong(Conflict):
    code = "trace_too_long"
    title = "Trace has too many steps"


def trace_out(t: Trace, namespace: str) -> TraceOut:
    return TraceOut(
        id=t.id,
        namespace=namespace,
        task=t.task,
        status=TraceStatus(t.status),
        outcome=t.outcome,
        success=t.success,
        user_id=t.user_id,
        agent_id=t.agent_id,
        session_id=t.session_id,
        metadata=t.metadata_,
        step_count=t.step_count,
        embedding_model=t.embedding_model,
        created_by=t.created_by,
        started_at=t.started_at,
        completed_at=t.completed_at,
    )


def step_out(s: TraceStep) -> TraceStepOut:
    return TraceStepOut(
        seq=s.seq,
        thought=s.thought,
        action=s.action,
        observation=s.observation,
        tool_name=s.tool_name,
        tool_args=s.tool_args,
        tool_result=s.tool_result,
        at=s.at,
    )


def trace_detail(t: Trace, namespace: str, steps: list[TraceStep]) -> TraceDetail:
    return TraceDetail(**trace_out(t, namespace).model_dump(), steps=[step_out(s) for s in steps])


class TraceOps(FacadeBase):
    """Reasoning traces."""

    async def _embed_or_none(self, p: Principal, text: str) -> list[float] | None:
        try:
            return (await self._embedder.embed([text], tenant=p.tenant_id))[0]
        except EmbeddingUnavailable:
            log.warning("trace embedding failed; storing the trace without a vector", exc_info=True)
            return None

    @operation("write")
    async def start_trace(self, p: Principal, ns: str, body: TraceIn) -> TraceOut:
        """Start a reasoning trace for a task; record its steps, then complete it with an outcome."""
        p.require("write", ns)
        # Embed before the transaction opens, so no connection waits on the model.
        vector = await self._embed_or_none(p, body.task)
        async with self._open(p, ns, scope=None) as (tx, namespace):
            t = await traces_repo.insert_trace(
                tx.session,
                {
                    "tenant_id": p.tenant_id,
                    "id": uuid.uuid4(),
                    "namespace_id": namespace.id,
                    "task": body.task,
                    "user_id": body.user_id,
                    "agent_id": body.agent_id,
                    "session_id": body.session_id,
                    "metadata_": body.metadata,
                    "embedding": vector,
                    "embedding_model": self._embedder.model_id if vector is not None else None,
                    "created_by": p.subject,
                },
            )
            await audit.record(
                tx.session, p.tenant_id, p.subject, "trace.start", namespace_id=namespace.id, target_id=str(t.id)
            )
        return trace_out(t, ns)

    @operation("write")
    async def add_trace_step(self, p: Principal, ns: str, trace_id: uuid.UUID, body: TraceStepIn) -> TraceStepOut:
        """Record the next step of an open trace; its `seq` is assigned here (1, 2, 3 ...)."""
        async with self._open(p, ns, "write") as (tx, namespace):
            if p.reader is not None:
                mine = await traces_repo.get(tx.session, p.tenant_id, namespace.id, trace_id)
                if mine is None or not p.sees_owner(mine.user_id):
                    raise TraceNotFound(f"No trace with id {trace_id}.")
            seq = await traces_repo.next_seq(tx.session, p.tenant_id, namespace.id, trace_id, MAX_STEPS)
            if seq is None:
                t = await traces_repo.get(tx.session, p.tenant_id, namespace.id, trace_id)
                if t is None:
                    raise TraceNotFound(f"No trace with id {trace_id}.")
                if t.status == TraceStatus.completed:
                    raise TraceCompleted(f"Trace {trace_id} is completed and takes no more steps.")
                raise TraceTooLong(f"Trace {trace_id} already has {MAX_STEPS} steps, the most one trace may have.")
            step = await traces_repo.insert_step(
                tx.session,
                {
                    "tenant_id": p.tenant_id,
                    "trace_id": trace_id,
                    "seq": seq,
                    "thought": body.thought,
                    "action": body.action,
                    "observation": body.observation,
                    "tool_name": body.tool_name,
                    "tool_args": body.tool_args,
                    "tool_result": body.tool_result,
                },
            )
            await self._audit(
                tx,
                p,
                "trace.step",
                namespace_id=namespace.id,
                target_id=str(trace_id),
                detail={"seq": seq},
            )
        return step_out(step)

    @operation("write")
    async def complete_trace(self, p: Principal, ns: str, trace_id: uuid.UUID, body: TraceCompleteIn) -> TraceOut:
        """Complete an open trace with its outcome and whether it succeeded; it takes no more steps.
        The trace is re-embedded from task and outcome, so search matches outcomes too."""
        async with self._open(p, ns, "write") as (tx, namespace):
            found = await traces_repo.get(tx.session, p.tenant_id, namespace.id, trace_id)
            if found is None or not p.sees_owner(found.user_id):
                raise TraceNotFound(f"No trace with id {trace_id}.")
            if found.status == TraceStatus.completed:
                raise TraceCompleted(f"Trace {trace_id} is already completed.")
            task = found.task
        # Embedded between two transactions so no connection waits on the model; the conditional
        # UPDATE below decides if a concurrent completion or deletion got there first.
        vector = await self._embed_or_none(p, f"{task}\n\n{body.outcome}")
        values: dict[str, object] = {"outcome": body.outcome, "success": body.success}
        if vector is not None:
            values |= {"embedding": vector, "embedding_model": self._embedder.model_id}
        async with self._open(p, ns, scope=None) as (tx, namespace):
            t = await traces_repo.complete(tx.session, p.tenant_id, namespace.id, trace_id, values)
            if t is None:
                if await traces_repo.get(tx.session, p.tenant_id, namespace.id, trace_id) is None:
                    raise TraceNotFound(f"No trace with id {trace_id}.")
                raise TraceCompleted(f"Trace {trace_id} is already completed.")
            await self._audit(
                tx,
                p,
                "trace.complete",
                namespace_id=namespace.id,
                target_id=str(trace_id),
                detail={"success": body.success, "steps": t.step_count},
            )
        return trace_out(t, ns)

    @operation("read")
    async def get_trace(self, p: Principal, ns: str, trace_id: uuid.UUID) -> TraceDetail:
        """One trace with every step in order."""
        async with self._open(p, ns, "read") as (tx, namespace):
            t = await traces_repo.get(tx.session, p.tenant_id, namespace.id, trace_id)
            # Another signed-in user's trace is not there for this one (acting.py).
            if t is None or not p.sees_owner(t.user_id):
                raise TraceNotFound(f"No trace with id {trace_id}.")
            steps = await traces_repo.steps_of(tx.session, p.tenant_id, [t.id])
        return trace_detail(t, ns, steps[t.id])

    @operation("read")
    async def list_traces(
        self,
        p: Principal,
        ns: str,
        *,
        status: TraceStatus | None = None,
        success: bool | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> TracePage:
        """Traces newest first (without their steps), optionally filtered; follow `next_cursor`."""
        p.require("read", ns)
        filters = TraceFilters(
            status=TraceStatus(status).value if status is not None else None,
            success=success,
            user_id=user_id,
            agent_id=agent_id,
        )
        async with self._open(p, ns, scope=None) as (tx, namespace):
            rows, next_cursor = await traces_repo.page(
                tx.session, p.tenant_id, namespace.id, filters, limit=limit, cursor=cursor
            )
        return TracePage(data=[trace_out(t, ns) for t in rows], next_cursor=next_cursor)

    @operation("search")
    async def search_traces(self, p: Principal, ns: str, req: TraceSearchIn) -> TraceSearchOut:
        """Past traces similar to a task, by meaning and by words, each with its steps to replay.
        Without the embedder, words alone (reported in `metrics.backend_failures`)."""
        p.require("read", ns)
        failures: list[str] = []
        started = time.perf_counter()
        try:
            qvec: list[float] | None = await self._embedder.embed_query(req.query)
        except EmbeddingUnavailable:
            log.warning("query embedding failed; serving lexical trace results only", exc_info=True)
            qvec, failures = None, ["embedding"]
        embed_ms = (time.perf_counter() - started) * 1000
        filters = TraceFilters(
            status=req.status.value if req.status is not None else None,
            success=req.success,
            user_id=req.user_id,
            agent_id=req.agent_id,
        )
        async with self._open(p, ns, scope=None) as (tx, namespace):
            outcome = await traces_repo.search(
                tx.session,
                tenant_id=p.tenant_id,
                namespace_id=namespace.id,
                query=req.query,
                query_vector=qvec,
                model_id=self._embedder.model_id,
                filters=filters,
                limit=req.limit,
                candidates=max(50, req.limit * 5),
            )
            steps = await traces_repo.steps_of(tx.session, p.tenant_id, [h.trace.id for h in outcome.hits])
        return TraceSearchOut(
            results=[
                TraceSearchResult(
                    score=h.score,
                    semantic_relevance=h.semantic_relevance,
                    signals=Signals(
                        dense_rank=h.dense_rank, lexical_rank=h.lexical_rank, lexical_score=h.lexical_score
                    ),
                    trace=trace_detail(h.trace, ns, steps[h.trace.id]),
                )
                for h in outcome.hits
            ],
            metrics=TraceSearchMetrics(
                timings_ms={
                    "embed": round(embed_ms, 2),
                    **outcome.timings_ms,
                    "total": round((time.perf_counter() - started) * 1000, 2),
                },
                matched_by=outcome.matched_by,
                backend_failures=failures,
            ),
        )

    @operation("write")
    async def delete_trace(self, p: Principal, ns: str, trace_id: uuid.UUID) -> None:
        """Delete a trace and all its steps, permanently."""
        async with self._open(p, ns, "write") as (tx, namespace):
            if p.reader is not None:
                mine = await traces_repo.get(tx.session, p.tenant_id, namespace.id, trace_id)
                if mine is None or not p.sees_owner(mine.user_id):
                    raise TraceNotFound(f"No trace with id {trace_id}.")
            steps = await traces_repo.remove(tx.session, p.tenant_id, namespace.id, trace_id)
            if steps is None:
                raise TraceNotFound(f"No trace with id {trace_id}.")
            await self._audit(
                tx,
                p,
                "trace.delete",
                namespace_id=namespace.id,
                target_id=str(trace_id),
                detail={"steps_deleted": steps},
            )
