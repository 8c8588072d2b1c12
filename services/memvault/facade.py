"""What every capability's part of the facade shares: the database, the embedder, settings,
the namespace lookup and the job hand-off.

NamespaceAPI (api.py) is assembled from one operations class per capability
(``memories.service.MemoryOps``, ``events.service.EventOps``, ...), each built on this base, so
that REST, MCP, jobs and the CLI still reach the data through one object and one set of rules.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

from memvault.audit import repository as audit
from memvault.config import Settings
from memvault.db.session import Database, TenantTx
from memvault.embeddings import Embedder
from memvault.errors import InvalidInput, NotFound
from memvault.memories.access import AccessLog
from memvault.metering.meter import UsageMeter
from memvault.metering.tally import note_namespace
from memvault.namespaces import repository as ns_repo
from memvault.namespaces.models import Namespace
from memvault.namespaces.schemas import NAMESPACE_NAME
from memvault.operations import Gate
from memvault.plans.book import PlanBook
from memvault.plans.cputurns import CpuTurns
from memvault.plans.fairshare import FairShare
from memvault.plans.gate import LimitGate
from memvault.principal import Principal, Scope
from memvault.retrieval.chain import ReaderChains
from memvault.retrieval.lexical import TermStatsCache
from memvault.retrieval.rerank import Reranker
from memvault.retrieval.rewrite import QueryRewriter
from memvault.status.latency import LatencyRecorder
from memvault.untimed import untimed_redis

log = logging.getLogger(__name__)


class NamespaceNotFound(NotFound):
    code = "namespace_not_found"
    title = "Namespace not found"


class JobDispatcher(Protocol):
    """Runs or queues a job whose row is already committed. The workers issue supplies RQ and
    in-process dispatchers; until one is configured, jobs wait in the table as `queued`."""

    async def dispatch(self, tenant_id: uuid.UUID, job_id: uuid.UUID, kind: str) -> None: ...

    async def cancel(self, job_id: uuid.UUID) -> None:
        """Drop a job cancelled while queued from its queue, where there is one. Only tidiness: a
        runner that reaches it anyway finds it cancelled in PostgreSQL and skips it."""
        ...


class HoldingDispatcher:
    """Leaves committed jobs queued in PostgreSQL for a worker to claim."""

    async def dispatch(self, tenant_id: uuid.UUID, job_id: uuid.UUID, kind: str) -> None:
        log.info("job %s (%s) queued for tenant %s", job_id, kind, tenant_id)

    async def cancel(self, job_id: uuid.UUID) -> None:
        return None


class FacadeBase:
    def __init__(
        self,
        db: Database,
        embedder: Embedder,
        settings: Settings,
        redis: Any = None,
        jobs: JobDispatcher | None = None,
        *,
        reranker: Reranker | None = None,
        rewriter: QueryRewriter | None = None,
    ) -> None:
        self._db = db
        self._embedder = embedder
        self._settings = settings
        self._redis = redis
        self._jobs: JobDispatcher = jobs or HoldingDispatcher()
        # The optional second stage of search (retrieval/stages.py); None = not configured.
        self._reranker = reranker
        self._rewriter = rewriter
        # Word frequencies per namespace for the lexical channel's BM25 (retrieval/lexical.py).
        self._term_stats = TermStatsCache()
        # Whether each reader's scope chain is small (retrieval/chain.py).
        self._chains = ReaderChains()
        self._term_refresh: dict[tuple[uuid.UUID, uuid.UUID], asyncio.Task[None]] = {}
        # Searches count accesses without waiting for the write (memories/access.py).
        self._accesses = AccessLog(db, interval_s=settings.access_write_interval_s)
        # Each tenant's plan and limits, kept a few seconds (plans/book.py).
        self._plans = PlanBook(db)
        # What every @operation passes through (operations.py), in order: limits, fair shares, metering.
        self._gates: list[Gate] = []
        # The Redis client of what every request does (memvault/untimed.py): the limits' admission and
        # the monthly caps' counts.
        self._untimed = untimed_redis(settings.redis_url) if settings.redis_url else None
        self._limit_gate = LimitGate(settings, self._plans, redis, self._untimed)
        self._gates.append(self._limit_gate)
        # Tenants take turns at the process's work (plans/fairshare.py), off unless the operator sets
        # places: on 2 cores it did not lower another tenant's latency measurably and it caps one
        # tenant's concurrency (docs/benchmarks.md). After the limits, so a request refused there
        # never waits for a turn; before metering, which bills only what ran. One tenant's line
        # holds half of what the process admits, so another tenant's requests still get in.
        slots = settings.fair_share_slots
        self._fair_share = FairShare(
            slots, wait_s=settings.fair_share_wait_s, line=max(slots, settings.max_in_flight // 2)
        )
        self._gates.append(self._fair_share)
        # Between their waits on the database, the operation of the tenant with the fewest in flight
        # runs first (plans/cputurns.py). Off unless MEMVAULT_FAIR_TURNS: on 2 cores it did not lower
        # another tenant's p95 beyond the benchmark's noise (docs/benchmarks.md).
        self._cpu_turns = CpuTurns(enabled=settings.fair_turns)
        self._gates.append(self._cpu_turns)
        # Every operation counted per tenant, key, namespace, door and operation (metering/meter.py).
        self._usage = UsageMeter(db, self._plans, redis=self._untimed)
        self._gates.append(self._usage)
        # Searches and writes timed per door for the status page (status/latency.py), written like usage.
        self._latency = LatencyRecorder(db)
        self._gates.append(self._latency)

    async def aclose(self) -> None:
        """Write what is still pending (access counts, usage) and stop counting term statistics. Call
        before disposing of the database."""
        await self._accesses.aclose()
        await self._usage.aclose()
        await self._latency.aclose()
        await self._limit_gate.aclose()
        if self._untimed is not None:
            await self._untimed.aclose()
        loop = asyncio.get_running_loop()
        # A count started on a loop that has ended (a test's) never ran on; only this loop's are awaited.
        counting = [task for task in self._term_refresh.values() if task.get_loop() is loop]
        for task in counting:
            task.cancel()
        # A count cut short only leaves the old counts, which no one will read any more.
        await asyncio.gather(*counting, return_exceptions=True)

    def _refresh_term_stats(self, tenant_id: uuid.UUID, namespace_id: uuid.UUID) -> None:
        """Count a namespace's term statistics again beside the searches that go on using the old
        ones (retrieval/lexical.py): one count at a time per namespace, in its own transaction."""
        key = (tenant_id, namespace_id)
        if key in self._term_refresh or not self._term_stats.stale(tenant_id, namespace_id):
            return

        async def count() -> None:
            try:
                async with self._db.tenant_tx(tenant_id) as tx:
                    await self._term_stats.refresh(tx.session, tenant_id, namespace_id)
            except Exception:  # the old counts serve on; the next search tries again
                log.warning("counting the term statistics of namespace %s failed", namespace_id, exc_info=True)
            finally:
                self._term_refresh.pop(key, None)

        self._term_refresh[key] = asyncio.get_running_loop().create_task(count(), name="memvault-term-stats")

    async def _namespace(self, tx: TenantTx, p: Principal, name: str) -> Namespace:
        if not re.fullmatch(NAMESPACE_NAME, name):
            # No namespace has such a name (and a NUL in it would fail in PostgreSQL): refused here
            # for every door, as REST's path pattern refuses it before the call.
            raise InvalidInput(
                "namespace: must be letters, digits, '.', '_' or '-', starting with a letter or digit, "
                "up to 63 characters",
                extra={"field": "namespace"},
            )
        ns = await ns_repo.by_name(tx.session, p.tenant_id, name)
        if ns is None:
            raise NamespaceNotFound(f"No namespace named '{name}'.")
        note_namespace(name)
        return ns

    @asynccontextmanager
    async def _open(
        self, p: Principal, ns: str, scope: Scope | None, **tx_options: Any
    ) -> AsyncIterator[tuple[TenantTx, Namespace]]:
        """The opening of every call on one namespace: check that p holds ``scope`` there, open
        p's tenant transaction (RLS-bound) and find the namespace in it (404 when it is not
        there). ``scope=None`` when the caller checked it already, before work that must not run
        for a caller without it."""
        if scope is not None:
            p.require(scope, ns)
        async with self._db.tenant_tx(p.tenant_id, **tx_options) as tx:
            yield tx, await self._namespace(tx, p, ns)

    @staticmethod
    async def _audit(
        tx: TenantTx,
        p: Principal,
        action: str,
        *,
        namespace_id: uuid.UUID | None = None,
        target_id: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """Record p's change in the audit log, in the change's own transaction."""
        await audit.record(
            tx.session, p.tenant_id, p.subject, action, namespace_id=namespace_id, target_id=target_id, detail=detail
        )
