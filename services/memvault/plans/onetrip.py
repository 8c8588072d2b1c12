"""A limited request's whole admission in one Redis round trip: the key's count, the tenant's
count, a concurrency slot and the windows the RateLimit headers report, in one Lua script.

Why a script of our own: the `limits` library counts one limit per call (``hit``, then
``get_window_stats`` to read it back), and has no call that counts several limits at once,
atomically, or pipelines them; with the slot beside them that was up to four sequential round
trips per request (docs/benchmarks-journal.md, issue 23: +2.7 ms p50 on a cached search). So the
script embeds the library's *own* Lua text (its RedisStorage's ``acquire_sliding_window`` and
``sliding_window`` scripts, read from the installed package, each wrapped as a local function)
and calls it on the very keys the library's ``SlidingWindowCounterRateLimiter`` uses under
``RateLimiter(prefix="memvault:plan")``: the arithmetic is the library's by construction, and the
library reads the same counts (tests/plans/test_onetrip.py checks ``get_window_stats`` agrees).
What the script adds is the order (slot, then key, then tenant) and the concurrency lease of
plans/concurrency.py. All keys of one call must live on one Redis node (no Redis Cluster across
hash slots), as the rest of memvault's Redis use assumes.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from limits import RateLimitItemPerMinute
from limits.aio.storage.redis.bridge import RedisBridge

from memvault.ratelimit import Window, _key

# The per-minute window of every plan limit (limits' RateLimitItemPerMinute.get_expiry()).
EXPIRY_S = 60


def _wrapped(name: str, source: bytes) -> str:
    # Parameters named KEYS and ARGV shadow the script globals: the library's text runs unchanged,
    # its `return` returning from the function.
    return f"local function {name}(KEYS, ARGV)\n{source.decode()}\nend\n"


# KEYS: key previous, key current, tenant previous, tenant current, the tenant's lease set.
# ARGV: key limit, tenant limit, cap (-1: not limited), window s, lease ms, lease id, then leases
# of this process still being given back (dropped first: a client that sends its next request on
# the answer finds its slot free even if the give-back has not reached Redis yet).
# Returns outcome, the key window's 4 numbers and the tenant window's 4 numbers as one string of 9
# integers separated by spaces (one bulk reply: redis-py parses a 9-element array reply line by
# line in Python, about a tenth of the gate's CPU); outcome 0 admitted, 1 refused by the key's
# limit (the tenant's not counted), 2 by the tenant's, 3 no slot (nothing counted: a request
# refused at the cap costs only its refusal).
_ADMIT = (
    _wrapped("acquire", RedisBridge.SCRIPT_ACQUIRE_SLIDING_WINDOW)
    + _wrapped("window", RedisBridge.SCRIPT_SLIDING_WINDOW)
    + """
local key_limit, tenant_limit, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local expiry = ARGV[4]
local outcome, now = 0, 0
if cap >= 0 then
  for i = 7, #ARGV do
    redis.call('ZREM', KEYS[5], ARGV[i])
  end
  -- plans/concurrency.py's take, on Redis's clock: lapsed leases go, then the cap is checked.
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
  if redis.call('ZCARD', KEYS[5]) >= cap then
    outcome = 3
  end
end
if outcome == 0 and key_limit >= 0 and not acquire({KEYS[1], KEYS[2]}, {key_limit, expiry, 1}) then
  outcome = 1
end
if outcome == 0 and tenant_limit >= 0 and not acquire({KEYS[3], KEYS[4]}, {tenant_limit, expiry, 1}) then
  outcome = 2
end
if outcome == 0 and cap >= 0 then
  redis.call('ZADD', KEYS[5], now + tonumber(ARGV[5]), ARGV[6])
  redis.call('PEXPIRE', KEYS[5], ARGV[5])
end
local out = {outcome}
local function add(w)
  for i = 1, 4 do
    out[#out + 1] = string.format('%d', tonumber(w[i]) or 0)
  end
end
if key_limit >= 0 then add(window({KEYS[1], KEYS[2]}, {expiry})) else add({0, 0, 0, 0}) end
if tenant_limit >= 0 and outcome ~= 1 then add(window({KEYS[3], KEYS[4]}, {expiry})) else add({0, 0, 0, 0}) end
return table.concat(out, ' ')
"""
)

ADMITTED, KEY_REFUSED, TENANT_REFUSED, NO_SLOT = 0, 1, 2, 3

# The most Redis key names OneTrip keeps (a few hundred bytes each).
_NAMED_MAX = 10_000


def window_of(
    policy: str, amount: int, prev_count: int, prev_ttl_ms: float, cur_count: int, cur_ttl_ms: float
) -> Window:
    """Where a limit stands, from the library's four numbers: the arithmetic of limits'
    ``SlidingWindowCounterRateLimiter.get_window_stats`` (and its Redis bridge's ms -> s), as
    ``RateLimiter.window`` turns it into a Window."""
    expiry = float(EXPIRY_S)
    prev_ttl, cur_ttl = max(0.0, prev_ttl_ms) / 1000, max(0.0, cur_ttl_ms) / 1000
    remaining = max(0, amount - math.floor(prev_count * prev_ttl / expiry + cur_count))
    reset_in = 0.0
    if prev_count or cur_count:
        previous_in = prev_ttl % (expiry / prev_count) if prev_count else math.inf
        current_in = cur_ttl % expiry if cur_count else math.inf
        reset_in = min(previous_in, current_in)
    return Window(policy, amount, remaining, max(0, math.ceil(reset_in)), True)


@dataclass(frozen=True)
class Admission:
    outcome: int
    key: Window | None  # None: no key limit
    tenant: Window | None  # None: no tenant limit, or not counted (the key refused)


class OneTrip:
    """The script, registered on the gateway's Redis client (redis-py reloads it after a
    SCRIPT FLUSH or a Redis restart)."""

    def __init__(self, redis: Any, *, rate_prefix: str = "memvault:plan", slot_prefix: str = "memvault:conc") -> None:
        self._script = redis.register_script(_ADMIT)
        self._rate_prefix = rate_prefix
        self._slot_prefix = slot_prefix
        # The Redis keys of each (policy, limit, key or tenant) seen: naming them hashes the
        # credential and builds a limits item, the same every request.
        self._named: dict[tuple[str, int, str], list[str]] = {}

    def _keys(self, policy: str, amount: int, ident: str) -> list[str]:
        named = self._named.get((policy, amount, ident))
        if named is None:
            # As limits names them: RedisStorage's "{key}" and "{key}/-1" under its key prefix.
            current = f"{self._rate_prefix}:{{{RateLimitItemPerMinute(amount).key_for(policy, _key((ident,)))}}}"
            named = [f"{current}/-1", current]
            if len(self._named) >= _NAMED_MAX:  # bounded: a process may see many keys over its life
                self._named.clear()
            self._named[(policy, amount, ident)] = named
        return named

    async def admit(
        self,
        tenant_id: uuid.UUID,
        credential: str,
        kind: str,
        per_key: int | None,
        per_tenant: int | None,
        cap: int | None,
        *,
        lease_ms: int,
        lease_id: str,
        returning: Iterable[str] = (),
    ) -> Admission:
        key_policy, tenant_policy = f"key-{kind}", f"tenant-{kind}"
        placeholder = [f"{self._rate_prefix}:-", f"{self._rate_prefix}:-"]
        keys = (
            (self._keys(key_policy, per_key, credential) if per_key is not None else placeholder)
            + (self._keys(tenant_policy, per_tenant, str(tenant_id)) if per_tenant is not None else placeholder)
            + [f"{self._slot_prefix}:{tenant_id}"]
        )
        args: list[Any] = [
            -1 if per_key is None else per_key,
            -1 if per_tenant is None else per_tenant,
            -1 if cap is None else cap,
            EXPIRY_S,
            lease_ms,
            lease_id,
            *returning,
        ]
        raw = await self._script(keys=keys, args=args)
        outcome, *n = (int(x) for x in raw.split())
        key_w = window_of(key_policy, per_key, *n[0:4]) if per_key is not None else None
        tenant_w = (
            window_of(tenant_policy, per_tenant, *n[4:8]) if per_tenant is not None and outcome != KEY_REFUSED else None
        )
        return Admission(outcome, key_w, tenant_w)
