"""Requests of one tenant running at once (a plan's ``concurrent_requests``), over every replica.

With Redis each running request holds a lease in a sorted set per tenant, scored by when it
lapses: a process that dies mid-request leaks its slot for at most ``lease_s``, not forever, and a
request that outlives its lease only stops counting (the cap is loose for it, never stuck). The
whole take is one Lua script, so two replicas cannot both take the last slot. Without Redis the
count is this process's.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# KEYS[1] the tenant's set; ARGV: cap, lease in ms, lease id. Redis's own clock, so replicas whose
# clocks differ still agree on which leases have lapsed.
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""


@dataclass(frozen=True)
class Lease:
    tenant_id: uuid.UUID
    id: str | None  # None: counted in this process (or not at all, Redis being away)


class Slots:
    def __init__(self, redis: Any = None, *, lease_s: float = 120.0, prefix: str = "memvault:conc") -> None:
        self._redis = redis
        self._lease_ms = int(lease_s * 1000)
        self._prefix = prefix
        self._local: dict[uuid.UUID, int] = {}
        self._take = redis.register_script(_TAKE) if redis is not None else None

    async def take(self, tenant_id: uuid.UUID, cap: int) -> Lease | None:
        """A slot of the tenant's ``cap``, or None when all are taken."""
        if self._take is None:
            held = self._local.get(tenant_id, 0)
            if held >= cap:
                return None
            self._local[tenant_id] = held + 1
            return Lease(tenant_id, None)
        lease = Lease(tenant_id, uuid.uuid4().hex)
        try:
            taken = await self._take(keys=[self._key(tenant_id)], args=[cap, self._lease_ms, lease.id])
        except Exception as exc:  # Redis away: serve unlimited rather than refuse every request
            log.warning("concurrency storage unavailable (%s); tenant %s not limited", exc, tenant_id)
            return _UNCOUNTED
        return lease if taken else None

    async def give_back(self, lease: Lease) -> None:
        """Free the slot (with Redis the gate gives back in batches instead: give_back_all). A
        give-back that fails leaves the lease to lapse."""
        if lease is _UNCOUNTED:
            return
        if lease.id is None:
            left = self._local[lease.tenant_id] - 1
            if left:
                self._local[lease.tenant_id] = left
            else:
                del self._local[lease.tenant_id]
            return
        try:
            await self._redis.zrem(self._key(lease.tenant_id), lease.id)
        except Exception as exc:
            log.warning("could not give back a concurrency slot (%s); it lapses by itself", exc)

    async def give_back_all(self, tenant_id: uuid.UUID, lease_ids: set[str]) -> None:
        """Free several of a tenant's slots held in Redis at once (plans/gate.py's batched
        give-back). One that fails leaves the leases to lapse."""
        if not lease_ids:
            return
        try:
            await self._redis.zrem(self._key(tenant_id), *lease_ids)
        except Exception as exc:
            log.warning("could not give back concurrency slots (%s); they lapse by themselves", exc)

    def _key(self, tenant_id: uuid.UUID) -> str:
        return f"{self._prefix}:{tenant_id}"


# Handed out when Redis could not be asked: nothing to give back.
_UNCOUNTED = Lease(uuid.UUID(int=0), "uncounted")
