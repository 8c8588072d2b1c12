"""The shared rate limiter (memvault/ratelimit.py): replicas on one Redis count together, each
tier says when to retry, a cleared key starts again, and a Redis that is gone lets attempts through."""

from __future__ import annotations

import pytest
import redis

from memvault.ratelimit import Limit, RateLimited, RateLimiter, client_address

LIMIT = Limit("test", "3/minute;5/hour")


async def test_replicas_sharing_redis_share_the_counts(redis_url: str) -> None:
    one, two = RateLimiter(redis_url), RateLimiter(redis_url)
    await one.hit(LIMIT, "ana@example.com", "10.0.0.1")
    await two.hit(LIMIT, "ana@example.com", "10.0.0.1")
    await one.hit(LIMIT, "ana@example.com", "10.0.0.1")
    with pytest.raises(RateLimited) as refused:
        await two.hit(LIMIT, "ana@example.com", "10.0.0.1")
    assert refused.value.status == 429 and refused.value.code == "rate_limited"
    assert 1 <= refused.value.retry_after <= 60
    assert refused.value.response_headers() == {"Retry-After": str(refused.value.retry_after)}
    # Another key is counted apart, and nothing readable about who was counted is stored.
    await two.hit(LIMIT, "bob@example.com", "10.0.0.1")
    keys = b" ".join(redis.Redis.from_url(redis_url).keys("*"))
    assert b"ana@example.com" not in keys and b"10.0.0.1" not in keys


async def test_the_longer_tier_is_the_backoff(redis_url: str) -> None:
    limiter = RateLimiter(redis_url)
    for _ in range(3):
        await limiter.hit(LIMIT, "k")
    await limiter.clear(Limit("test", "3/minute"), "k")  # the minute has passed, say
    await limiter.hit(LIMIT, "k")
    await limiter.hit(LIMIT, "k")
    with pytest.raises(RateLimited) as refused:
        await limiter.hit(LIMIT, "k")
    assert refused.value.retry_after > 60  # now it is the hour that has to pass


async def test_without_redis_each_process_counts_in_memory() -> None:
    one, two = RateLimiter(None), RateLimiter(None)
    for _ in range(3):
        await one.hit(LIMIT, "k")
    with pytest.raises(RateLimited):
        await one.hit(LIMIT, "k")
    await two.hit(LIMIT, "k")


async def test_an_unreachable_redis_lets_attempts_through() -> None:
    gone = RateLimiter("redis://127.0.0.1:1/0")
    for _ in range(5):
        await gone.hit(LIMIT, "k")


def test_addresses() -> None:
    assert client_address("203.0.113.9") == "203.0.113.9"
    assert client_address("::ffff:203.0.113.9") == "203.0.113.9"
    assert client_address("2001:db8:1:2:3:4:5:6") == client_address("2001:db8:1:2:ffff::1") == "2001:db8:1:2::/64"
    assert client_address(None) == "unknown"
