"""The rate-limit gate: every operation a door makes (operations.py) is counted against the
caller's plan, per API key (or OAuth grant) and per tenant, for its kind (read, write, search), and
held to the tenant's concurrent requests. Jobs and the CLI (a Principal with no door credential)
are never limited; a plan with no limit for the kind costs no storage round trip at all.

With Redis, a limited request costs one round trip before the call (plans/onetrip.py: both counts,
the slot and the windows in one script) and none after it (its slot goes back with the tenant's
next admission, or in a batch soon after: `_give_back_later`). Without Redis the counts are this
process's memory (`_count`).

Where each limit stands is left in a per-request report (``reporting``) that the gateway's
middleware turns into the `RateLimit-Policy` / `RateLimit` headers of the REST answer; a door with
no report (MCP, jobs) just does not get the headers.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any

from memvault.config import Settings
from memvault.operations import Operation
from memvault.plans.book import PlanBook
from memvault.plans.concurrency import Lease, Slots
from memvault.plans.onetrip import ADMITTED, KEY_REFUSED, TENANT_REFUSED, OneTrip
from memvault.principal import Principal
from memvault.ratelimit import Limit, RateLimited, RateLimiter, Window

log = logging.getLogger(__name__)

# Seconds a tenant at its concurrency cap is told to wait: a slot frees when any request ends.
CONCURRENCY_RETRY_S = 1
# Longest a returned concurrency slot waits for the tenant's next admission to drop it in Redis
# before a batched give-back of its own (_give_back_later).
GIVE_BACK_DELAY_S = 0.05
# Longest a limited request waits for its admission before it is let through unlimited (Redis away
# or hung): redis-py's default socket timeout, which bounded it before the gate had its own client.
ADMIT_TIMEOUT_S = 5.0

# Concurrency leases are named by this process's random token and a count: unique over every
# replica without a uuid4 (a urandom read) per request. A forked worker draws a token of its own.
_process_token = uuid.uuid4().hex[:16]
_lease_numbers = itertools.count()


def _new_process_token() -> None:
    global _process_token, _lease_numbers
    _process_token, _lease_numbers = uuid.uuid4().hex[:16], itertools.count()


os.register_at_fork(after_in_child=_new_process_token)


def _lease_id() -> str:
    return f"{_process_token}{next(_lease_numbers):x}"


_report: ContextVar[list[Window] | None] = ContextVar("memvault_rate_report", default=None)


@contextmanager
def reporting() -> Iterator[list[Window]]:
    """Collect, for one request, the windows of the limits it was counted against. A list, not a
    value: the gate runs in tasks the request spawns, which see this object but not a set()."""
    windows: list[Window] = []
    token = _report.set(windows)
    try:
        yield windows
    finally:
        _report.reset(token)


def _report_windows(windows: list[Window]) -> None:
    held = _report.get()
    if held is not None:
        held[:] = windows


async def _nothing() -> None:
    return None


def _refusal(w: Window | None, quota: int, per: str, kind: str) -> RateLimited:
    # Without a window (its read failed) the client still gets a wait: a few seconds.
    retry = max(1, w.reset_s) if w is not None else 5
    return RateLimited(f"This {per} may make {quota} {kind} requests a minute; retry in {retry} s.", retry_after=retry)


def _no_slot(cap: int) -> RateLimited:
    return RateLimited(
        f"This tenant already runs {cap} requests at once, its plan's limit; retry in {CONCURRENCY_RETRY_S} s.",
        retry_after=CONCURRENCY_RETRY_S,
    )


class LimitGate:
    def __init__(self, settings: Settings, plans: PlanBook, redis: Any = None, untimed: Any = None) -> None:
        """``untimed``: the facade's Redis client without a socket timeout (memvault/untimed.py),
        which admits a limited request in one round trip (plans/onetrip.py); bounded here by
        ADMIT_TIMEOUT_S around each admission."""
        self._plans = plans
        self._rates = RateLimiter(settings.redis_url, prefix="memvault:plan")
        self._slots = Slots(redis if settings.redis_url else None, lease_s=settings.concurrency_lease_s)
        self._lease_ms = int(settings.concurrency_lease_s * 1000)
        self._onetrip = OneTrip(untimed) if settings.redis_url and redis is not None and untimed is not None else None
        # Slots given back but not yet in Redis: the lease ids, by tenant, that the tenant's next
        # admission drops itself, and the task that sends the rest (see _give_back_later).
        self._returning: dict[uuid.UUID, set[str]] = {}
        self._flushing: asyncio.Task[None] | None = None
        # Refused credentials per client address (count_bad_credential).
        self._bad = Limit("bad-credentials", settings.bad_credentials_limit_per_address)
        self._credentials = RateLimiter(settings.redis_url)

    @asynccontextmanager
    async def admit(self, p: Principal, op: Operation) -> AsyncIterator[None]:
        credential = p.credential
        if credential is None:
            yield
            return
        limits = (await self._plans.of(p.tenant_id)).limits
        per_key, per_tenant = limits.per_minute("key", op.kind), limits.per_minute("tenant", op.kind)
        cap = limits.concurrent_requests
        if per_key is None and per_tenant is None and cap is None:
            yield
            return
        if self._onetrip is not None:
            lease = await self._admit(p.tenant_id, credential, op.kind, per_key, per_tenant, cap)
        else:
            lease = await self._count(p.tenant_id, credential, op.kind, per_key, per_tenant, cap)
        try:
            yield
        finally:
            if lease is not None and lease.id is not None and self._onetrip is not None:
                self._give_back_later(lease)
            elif lease is not None:
                await self._slots.give_back(lease)

    async def _admit(
        self,
        tenant_id: uuid.UUID,
        credential: str,
        kind: str,
        per_key: int | None,
        per_tenant: int | None,
        cap: int | None,
    ) -> Lease | None:
        """`_count`'s rules in one Redis round trip (plans/onetrip.py): the key's limit first, the
        tenant's only if the key may go on, the slot last; plus what the headers report. A request
        refused at the concurrency cap is counted against neither limit. Redis away: let through."""
        assert self._onetrip is not None
        lease = Lease(tenant_id, _lease_id()) if cap is not None else None
        windows: list[Window] = []
        returning = tuple(self._returning.get(tenant_id, ())) if cap is not None else ()
        try:
            async with asyncio.timeout(ADMIT_TIMEOUT_S):
                got = await self._onetrip.admit(
                    tenant_id,
                    credential,
                    kind,
                    per_key,
                    per_tenant,
                    cap,
                    lease_ms=self._lease_ms,
                    lease_id=lease.id if lease is not None and lease.id is not None else "",
                    returning=returning,
                )
        except Exception as exc:  # Redis away: serve unlimited rather than refuse every request
            log.warning("rate limit storage unavailable (%s); tenant %s not limited", exc, tenant_id)
            return None
        if returning:  # the script dropped them
            waiting = self._returning.get(tenant_id)
            if waiting is not None:
                waiting.difference_update(returning)
                if not waiting:
                    del self._returning[tenant_id]
        try:
            if got.outcome == KEY_REFUSED:
                assert got.key is not None
                windows.append(got.key.after(False))
                raise _refusal(got.key, per_key or 0, "API key", kind)
            windows += [got.key] if got.key is not None else []
            windows += [got.tenant.after(got.outcome != TENANT_REFUSED)] if got.tenant is not None else []
            if got.outcome == TENANT_REFUSED:
                raise _refusal(got.tenant, per_tenant or 0, "tenant", kind)
            if got.outcome != ADMITTED:
                raise _no_slot(cap or 0)
        finally:
            _report_windows(windows)
        return lease

    def _give_back_later(self, lease: Lease) -> None:
        """Give the slot back without a round trip of its own: the lease id waits in
        ``_returning`` for the tenant's next admission from this process, whose script drops it
        on its way (under load, every request's slot goes back so); a tenant that sends nothing
        more within GIVE_BACK_DELAY_S has it given back by one batched ZREM. Until then the slot
        still counts for the other replicas, for at most that delay. A give-back that fails leaves
        the lease to lapse (MEMVAULT_CONCURRENCY_LEASE_S); `aclose` sends what is waiting."""
        assert lease.id is not None
        self._returning.setdefault(lease.tenant_id, set()).add(lease.id)
        if self._flushing is None:
            self._flushing = asyncio.get_running_loop().create_task(self._give_back_soon(), name="memvault-slots")

    async def _give_back_soon(self) -> None:
        try:
            await asyncio.sleep(GIVE_BACK_DELAY_S)
        finally:
            self._flushing = None
        await self._give_back_waiting()

    async def _give_back_waiting(self) -> None:
        # The ids stay in ``_returning`` until their ZREM is answered: it goes on another of the
        # pool's connections, and an admission sent meanwhile may reach Redis first; carrying the
        # ids too, it does not find the slots still taken (a second ZREM of an id is harmless).
        waiting = {t: set(ids) for t, ids in self._returning.items()}
        try:
            await asyncio.gather(*(self._slots.give_back_all(t, ids) for t, ids in waiting.items()))
        finally:
            for t, ids in waiting.items():
                held = self._returning.get(t)
                if held is not None:
                    held.difference_update(ids)
                    if not held:
                        del self._returning[t]

    async def aclose(self) -> None:
        """Give back the slots still waiting (before the Redis client closes)."""
        flushing, self._flushing = self._flushing, None
        if flushing is not None and flushing.get_loop() is asyncio.get_running_loop():
            flushing.cancel()
        await self._give_back_waiting()

    async def _count(
        self,
        tenant_id: uuid.UUID,
        credential: str,
        kind: str,
        per_key: int | None,
        per_tenant: int | None,
        cap: int | None,
    ) -> Lease | None:
        """Count the request against the key's limit, then, only if the key may go on, the
        tenant's: a key refused at its own limit must not spend the budget the tenant's other keys
        share. The concurrency slot is taken first: a request refused at the cap is counted against
        neither limit. A window is read after its count (the headers say where the request left
        it). This path serves the memory storage (no Redis), where a call costs no round trip; with
        Redis, `_admit` does the same in one. Returns the slot to give back (None: no cap)."""
        rates, tenant = self._rates, str(tenant_id)
        # Windows are read for the headers of a REST answer; a door without them (MCP) skips the
        # reads, but for the Retry-After of a refusal.
        report = _report.get() is not None
        key_policy, tenant_policy = f"key-{kind}", f"tenant-{kind}"
        windows: list[Window] = []
        lease: Lease | None = None
        try:
            if cap is not None:
                lease = await self._slots.take(tenant_id, cap)
                if lease is None:
                    raise _no_slot(cap)
            key_ok = await rates.count(key_policy, per_key, credential) if per_key is not None else None
            if key_ok is False:
                window = await rates.window(key_policy, per_key or 0, credential)
                windows += [window.after(False)] if window else []
                raise _refusal(window, per_key or 0, "API key", kind)
            tenant_ok, key_window = await asyncio.gather(
                rates.count(tenant_policy, per_tenant, tenant) if per_tenant is not None else _nothing(),
                rates.window(key_policy, per_key, credential)
                if report and key_ok and per_key is not None
                else _nothing(),
            )
            windows += [key_window] if key_window else []
            if tenant_ok is False or (tenant_ok and report):
                window = await rates.window(tenant_policy, per_tenant or 0, tenant)
                windows += [window.after(tenant_ok)] if window else []
                if not tenant_ok:
                    raise _refusal(window, per_tenant or 0, "tenant", kind)
        except BaseException:
            if lease is not None:
                await self._slots.give_back(lease)
            raise
        finally:
            _report_windows(windows)
        return lease

    async def count_bad_credential(self, address: str) -> None:
        """Count a refused credential from ``address`` (client_address: IPv6 counts by /64); past
        the first tier the refusal becomes 429 with Retry-After (slowed), past the later ones for
        longer (refused). Only failures are counted and a valid credential is never refused, so a
        stranger sending bad keys cannot lock out the owner of a good one."""
        await self._credentials.hit(self._bad, address, what="requests with invalid credentials")
