"""Each tenant's plan as the request path needs it: read once and kept for a few seconds, so rate
limits and quotas cost no database round trip per request. A plan changed by the operator takes
effect within ``ttl_s`` on every replica."""

from __future__ import annotations

import time
import uuid

from memvault.db.session import Database
from memvault.plans import repository as repo
from memvault.plans.limits import UNLIMITED
from memvault.plans.repository import TenantPlan


class PlanBook:
    def __init__(self, db: Database, *, ttl_s: float = 10.0) -> None:
        self._db = db
        self._ttl_s = ttl_s
        self._plans: dict[uuid.UUID, tuple[float, TenantPlan]] = {}

    async def of(self, tenant_id: uuid.UUID) -> TenantPlan:
        held = self._plans.get(tenant_id)
        now = time.monotonic()
        if held is not None and now - held[0] < self._ttl_s:
            return held[1]
        async with self._db.tenant_tx(tenant_id) as tx:
            plan = await repo.of_tenant(tx.session, tenant_id)
        # A tenant with no row (the system tenant) is limited by nothing it could reach anyway.
        plan = plan or TenantPlan("unlimited", UNLIMITED, {})
        self._plans[tenant_id] = (now, plan)
        return plan

    def forget(self, tenant_id: uuid.UUID) -> None:
        """Read the tenant's plan again next time (after this process changed it)."""
        self._plans.pop(tenant_id, None)
