"""A tenant's monthly counts (events ingested, tokens embedded) shared live by every replica
through Redis, so that a monthly cap holds across replicas and between writers running at once.

One hash per tenant and month, ``memvault:month:<tenant>:<YYYY-MM>``, holds the month's use as
the replicas know it: what the usage table holds, plus what every replica has counted and not
yet written, plus what writes running now have taken ahead (``take``). A write takes what it is
about to add in the same script that checks the cap, so two writers never both fit where one
does; when it ends, its meter adds the difference between what it used and what it took
(``add``, from a task, within a round trip; before the counts are written to the table, so the
hash is never behind the table). The table stays the record: Redis keeps nothing on disk here,
so a hash that is missing (a new month, a Redis restarted) is first filled from the table
(``raise_to``), and every read of the table's totals raises the hash to them again, which bounds
what a lost hash forgets to what other replicas had not yet written. A replica that crashes with
a write under way leaves what that write took in the month's count: the cap errs on the side of
refusing.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

# The units a monthly cap counts, in the order every list of numbers per unit gives them; the
# scripts take the names from here.
MONTHLY_UNITS = ("events_ingested", "tokens_embedded")

# Longest a call waits for Redis (away or hung) before the meter goes on with its own count.
TIMEOUT_S = 5.0

# A tenant's month (its start) and what to add to it, one number per MONTHLY_UNITS.
Difference = tuple[uuid.UUID, datetime, list[int]]

# A month's hash outlives the month by a week: an operation that began before midnight may still
# add its difference to it, and the hash is not needed after that.
_KEPT_AFTER_MONTH = timedelta(days=7)

# Take ``adding`` of a unit if the month's use plus it stays within ``limit``. Replies -1 when the
# hash is missing (to be filled from the table first), -2 when taken (or, with hold 0, when it
# fits), else the use that refuses it.
_TAKE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local used = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if used + tonumber(ARGV[2]) > tonumber(ARGV[3]) then return used end
if ARGV[4] == '1' then redis.call('HINCRBY', KEYS[1], ARGV[1], ARGV[2]) end
return -2
"""

# Raise each unit to at least its floor (the table's total), creating the hash if it is missing;
# reply with the month's use. ARGV: the expiry, the number of units n, the n units, their n floors.
_RAISE = """
local n = tonumber(ARGV[2])
local units = {}
for i = 1, n do
  local unit, floor = ARGV[2 + i], tonumber(ARGV[2 + n + i])
  units[i] = unit
  if tonumber(redis.call('HGET', KEYS[1], unit) or '-1') < floor then
    redis.call('HSET', KEYS[1], unit, floor)
  end
end
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
return redis.call('HMGET', KEYS[1], unpack(units))
"""

# Add each key's differences to the hashes that exist; reply with the (1-based) positions of the
# keys that do not, to be filled from the table and added again. ARGV: the number of units n, the
# n units, then n differences per key.
_ADD = """
local n = tonumber(ARGV[1])
local missing = {}
for i, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 1 then
    for u = 1, n do
      redis.call('HINCRBY', key, ARGV[1 + u], ARGV[1 + n + n * (i - 1) + u])
    end
  else
    table.insert(missing, i)
  end
end
return missing
"""


class SharedMonth:
    """The months' counts in one Redis (its scripts assume one node, as the limits' do)."""

    def __init__(self, redis: Any, *, prefix: str = "memvault:month") -> None:
        """``redis``: a client without a socket timeout (memvault/untimed.py), not closed here;
        each call is bounded by TIMEOUT_S instead."""
        self._redis = redis
        self._prefix = prefix
        self._take = redis.register_script(_TAKE)
        self._raise = redis.register_script(_RAISE)
        self._add = redis.register_script(_ADD)

    def _key(self, tenant_id: uuid.UUID, month: datetime) -> str:
        return f"{self._prefix}:{tenant_id}:{month:%Y-%m}"

    async def take(
        self, tenant_id: uuid.UUID, month: datetime, unit: str, adding: int, limit: int, *, hold: bool
    ) -> int | None:
        """Take ``adding`` of ``unit`` (only check, with ``hold`` false) if it fits under ``limit``:
        None when it does, the use that refuses it when it does not; raises LookupError when the
        month's hash must first be filled (``raise_to``)."""
        async with asyncio.timeout(TIMEOUT_S):
            reply = int(await self._take(keys=[self._key(tenant_id, month)], args=[unit, adding, limit, int(hold)]))
        if reply == -1:
            raise LookupError(unit)
        return None if reply == -2 else reply

    async def raise_to(self, tenant_id: uuid.UUID, month: datetime, end: datetime, floor: Sequence[int]) -> list[int]:
        """Raise the month's use to at least ``floor`` (one number per MONTHLY_UNITS) and return it."""
        expire_ms = int((end + _KEPT_AFTER_MONTH).timestamp() * 1000)
        async with asyncio.timeout(TIMEOUT_S):
            reply = await self._raise(
                keys=[self._key(tenant_id, month)], args=[expire_ms, len(MONTHLY_UNITS), *MONTHLY_UNITS, *floor]
            )
        return [int(v) for v in reply]

    async def add(self, differences: Sequence[Difference]) -> list[Difference]:
        """Add what operations used beyond (or short of) what they took, per tenant and month;
        return those whose month's hash is missing (nothing was added to them)."""
        keys: list[str] = []
        args: list[int | str] = [len(MONTHLY_UNITS), *MONTHLY_UNITS]
        for tenant_id, month, units in differences:
            keys.append(self._key(tenant_id, month))
            args.extend(units)
        if not keys:
            return []
        async with asyncio.timeout(TIMEOUT_S):
            missing = await self._add(keys=keys, args=args)
        return [differences[int(i) - 1] for i in missing]
