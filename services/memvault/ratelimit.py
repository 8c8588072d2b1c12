"""The shared rate limiter: named limits of one or more tiers ("5/minute;20/hour"), counted in a
moving window by the `limits` library, in Redis when one is configured (so every gateway replica
counts the same attempts) and in this process's memory otherwise.

Sign-in, client registration, the token endpoint and refused credentials use `hit` with a `Limit`;
tiers are the backoff: a caller who keeps failing after the first tier is spent waits for the next,
longer window. The plans' requests per minute (plans/gate.py) use `count` and `window`: a
sliding-window counter, whose work per request stays constant at any limit (the moving window
keeps one entry per request, 20,000 for an enterprise tenant's minute).
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import math
import time
from dataclasses import dataclass, replace
from typing import Any

from limits import RateLimitItem, RateLimitItemPerMinute, parse_many
from limits.aio.storage import MemoryStorage, RedisStorage
from limits.aio.strategies import MovingWindowRateLimiter, SlidingWindowCounterRateLimiter
from limits.errors import StorageError

from memvault.errors import MemvaultError

log = logging.getLogger(__name__)


class RateLimited(MemvaultError):
    status = 429
    code = "rate_limited"
    title = "Too many requests"

    def __init__(self, detail: str, *, retry_after: int) -> None:
        super().__init__(detail, extra={"retry_after": retry_after})
        self.retry_after_s = retry_after


@dataclass(frozen=True)
class Limit:
    """A named limit; `spec` is the limits library's notation, tiers separated by ';'."""

    name: str
    spec: str

    @property
    def tiers(self) -> list[RateLimitItem]:
        return parse_many(self.spec)


def check_spec(spec: str) -> str:
    """For settings: refuse a limit string the library cannot read at start, not on first use."""
    try:
        parse_many(spec)
    except ValueError as exc:
        raise ValueError(f"not a rate limit: {spec!r} (write e.g. '5/minute;20/hour')") from exc
    return spec


def client_address(host: str | None) -> str:
    """Who is counted for a per-address limit: the IPv4 address, or the IPv6 /64 (one host
    commonly holds a whole /64, so a single address would be no limit at all)."""
    try:
        ip = ipaddress.ip_address(host or "")
    except ValueError:
        return host or "unknown"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def _key(parts: tuple[str, ...]) -> str:
    # Emails and addresses are counted, never stored readable in Redis.
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Window:
    """Where one per-minute limit stands after a request was counted against it: what the
    `RateLimit-Policy` / `RateLimit` headers tell the client (draft-ietf-httpapi-ratelimit-headers)."""

    policy: str
    quota: int
    remaining: int
    reset_s: int
    allowed: bool
    window_s: int = 60

    def after(self, counted: bool) -> Window:
        """This window, read after a request was counted in it, as the refusal reports it."""
        return self if counted else replace(self, remaining=0, allowed=False)


class RateLimiter:
    def __init__(self, redis_url: str | None, *, prefix: str = "memvault:rl") -> None:
        storage: Any
        if redis_url:
            # Short timeouts: a hung Redis must slow a sign-in by a second, not hang it.
            storage = RedisStorage(
                f"async+{redis_url}",
                implementation="redispy",
                key_prefix=prefix,
                wrap_exceptions=True,
                socket_timeout=1.0,
                socket_connect_timeout=1.0,
            )
        else:
            storage = MemoryStorage(wrap_exceptions=True)
        self._limiter = MovingWindowRateLimiter(storage)
        self._counter = SlidingWindowCounterRateLimiter(storage)

    async def hit(self, limit: Limit, *key: str, what: str = "requests") -> None:
        """Count one attempt for ``key`` against each tier of ``limit``; RateLimited (saying when
        to retry) if a tier is already full. A storage failure lets the attempt through: losing
        Redis must not lock every user out, and the attempt still costs an Argon2 hash."""
        ident = _key(key)
        for tier in limit.tiers:
            try:
                if await self._limiter.hit(tier, limit.name, ident):
                    continue
                stats = await self._limiter.get_window_stats(tier, limit.name, ident)
            except StorageError as exc:
                log.warning("rate limit storage unavailable (%s); %s not limited", exc, limit.name)
                return
            retry = max(1, math.ceil(stats.reset_time - time.time()))
            # Imported here, not at the top: config.py imports this module, and `memvault serve`'s
            # parent must not load the metrics before it has set up their multiprocess folder.
            from memvault.observability import metrics

            metrics.RATE_LIMITED.labels(limit.name).inc()
            raise RateLimited(f"Too many {what}; retry in {retry} s.", retry_after=retry)

    async def clear(self, limit: Limit, *key: str) -> None:
        ident = _key(key)
        for tier in limit.tiers:
            try:
                await self._limiter.clear(tier, limit.name, ident)
            except StorageError as exc:
                log.warning("rate limit storage unavailable (%s); %s not cleared", exc, limit.name)

    async def count(self, policy: str, per_minute: int, *key: str) -> bool | None:
        """Count one request for ``key`` against ``per_minute`` in ``policy``: whether it fits (a
        request refused is not counted), None when the storage failed (the request goes through:
        losing Redis must not refuse every request). Plans' limits use a sliding-window counter,
        constant work per request however high the limit, unlike the moving window's list."""
        try:
            return await self._counter.hit(RateLimitItemPerMinute(per_minute), policy, _key(key))
        except StorageError as exc:
            log.warning("rate limit storage unavailable (%s); %s not limited", exc, policy)
            return None

    async def window(self, policy: str, per_minute: int, *key: str) -> Window | None:
        """Where ``key`` stands in ``policy`` now (read after the count, for the headers)."""
        try:
            stats = await self._counter.get_window_stats(RateLimitItemPerMinute(per_minute), policy, _key(key))
        except StorageError as exc:
            log.warning("rate limit storage unavailable (%s); %s not reported", exc, policy)
            return None
        reset = max(0, math.ceil(stats.reset_time - time.time()))
        return Window(policy, per_minute, max(0, stats.remaining), reset, True)
