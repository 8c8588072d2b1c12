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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
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


class Slots:
    def __init__(self, redis: Any = None, *, lease_s: float = 120.0, prefix: str = "memvault:conc") -> None:
        self._redis = redis
        self._lease_ms = int(lease_s * 1000)
        self._prefix = prefix
        self._local: dict[uuid.UUID, int] = {}
        self._take = redis.register_script(_TAKE) if redis is not None else None

    @asynccontextmanager
    async def hold(self, tenant_id: uuid.UUID, cap: int) -> AsyncIterator[bool]:
        """Yield whether a slot was free (and hold it until the block ends)."""
        if self._take is None:
            if self._local.get(tenant_id, 0) >= cap:
                yield False
                return
            self._local[tenant_id] = self._local.get(tenant_id, 0) + 1
            try:
                yield True
            finally:
                left = self._local[tenant_id] - 1
                if left:
                    self._local[tenant_id] = left
                else:
                    del self._local[tenant_id]
            return
        key, lease = f"{self._prefix}:{tenant_id}", uuid.uuid4().hex
        try:
            taken = bool(await self._take(keys=[key], args=[cap, self._lease_ms, lease]))
        except Exception as exc:  # Redis away: serve unlimited rather than refuse every request
            log.warning("concurrency storage unavailable (%s); tenant %s not limited", exc, tenant_id)
            yield True
            return
        try:
            yield taken
        finally:
            if taken:
                try:
                    await self._redis.zrem(key, lease)
                except Exception as exc:  # the lease lapses by itself
                    log.warning("could not give back a concurrency slot (%s)", exc)
