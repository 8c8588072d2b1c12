"""NamespaceAPI: the one entry point that REST, MCP, jobs and the CLI call.

Every method takes the caller's Principal first, checks its scope, opens a tenant transaction
(RLS-bound), does the work through the capability repositories, records an audit entry for
changes, and returns API schemas. Nothing else opens tenant transactions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from memvault import __version__
from memvault.audit.service import AuditOps
from memvault.contradictions.service import ContradictionOps
from memvault.entities.service import EntityOps
from memvault.events.service import EventOps
from memvault.extraction.service import ExtractionOps
from memvault.facade import FacadeBase
from memvault.facts.service import FactOps
from memvault.forget.service import ForgetOps
from memvault.graph.service import GraphOps
from memvault.idempotency.service import IdempotencyOps
from memvault.jobs.registry import job_handlers
from memvault.jobs.service import JobOps
from memvault.keys.service import KeyOps
from memvault.maintenance.service import MaintenanceOps
from memvault.members.service import MemberOps
from memvault.members.signup import SignupOps
from memvault.memories.service import MemoryOps
from memvault.namespaces.service import NamespaceOps
from memvault.oauth.accounts import AccountOps
from memvault.oauth.signin import SignInOps
from memvault.oauth.tokens import TokenOps
from memvault.observations.service import ObservationOps
from memvault.operations import operation
from memvault.operator import OperatorOps
from memvault.overview.service import OverviewOps
from memvault.plans.limits import month_bounds
from memvault.plans.service import LimitOps
from memvault.portability.service import PortabilityOps
from memvault.principal import Principal
from memvault.retrieval.service import SearchOps
from memvault.status.service import StatusOps
from memvault.traces.service import TraceOps
from memvault.webhooks.service import WebhookOps
from memvault.websessions.service import WebSessionOps

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Health:
    version: str
    database: bool
    redis: bool | None
    embedding_model: str
    embedded_database: bool


class NamespaceAPI(
    NamespaceOps,
    KeyOps,
    AuditOps,
    MemoryOps,
    SearchOps,
    EntityOps,
    GraphOps,
    EventOps,
    TraceOps,
    ForgetOps,
    PortabilityOps,
    IdempotencyOps,
    JobOps,
    ExtractionOps,
    ObservationOps,
    MaintenanceOps,
    SignupOps,
    MemberOps,
    WebSessionOps,
    SignInOps,
    TokenOps,
    AccountOps,
    OperatorOps,
    LimitOps,
    OverviewOps,
    StatusOps,
    FactOps,
    ContradictionOps,
    WebhookOps,
    FacadeBase,
):
    # ---- status ---------------------------------------------------------------------------

    async def health(self) -> Health:
        redis_ok: bool | None = None
        if self._redis is not None:
            try:
                redis_ok = bool(await self._redis.ping())
            except Exception:
                redis_ok = False
        return Health(
            version=__version__,
            database=await self._db.ping(),
            redis=redis_ok,
            embedding_model=self._embedder.model_id,
            embedded_database=self._db.urls.embedded,
        )

    @operation("read")
    async def tenant_summary(self, p: Principal) -> dict[str, Any]:
        namespaces = await self.list_namespaces(p)
        return {
            "tenant_id": str(p.tenant_id),
            "subject": p.subject,
            "scopes": sorted(p.scopes),
            "namespaces": [n.name for n in namespaces],
            "memories": sum(n.memory_count or 0 for n in namespaces),
            # The signed-in user every memory call acts as; None: the user each call names.
            "acting_as_user": p.user_id,
        }

    @operation("read")
    async def account_overview(self, p: Principal) -> dict[str, Any]:
        """One call's view of the account (the MCP memory_account tool): what tenant_summary
        shows, the plan with its limits, each quota's use, and this month's usage per door."""
        summary = await self.tenant_summary(p)
        plan = await self.account_plan(p)
        start, _ = month_bounds()
        usage = await self.account_usage(p, start=start, granularity="day", group_by="door")
        month: dict[str, dict[str, int]] = {}
        for point in usage.points:
            held = month.setdefault(point.group or "", {})
            for unit, n in point.model_dump(exclude={"period", "group"}).items():
                held[unit] = held.get(unit, 0) + n
        return {**summary, **plan.model_dump(mode="json"), "usage_this_month": month}


# Every job kind has its handler, or neither the server nor a worker starts (jobs/registry.py).
job_handlers(NamespaceAPI)
