"""The Redis client of what runs on every request: a limited request's admission (plans/gate.py)
and a monthly cap's count (metering/month.py). Its connections have no socket timeout: with one
(redis-py's default is 5 s) every command is sent under ``asyncio.wait_for``, a task and a loop
turn more per command, 18 % of an admission's CPU (docs/benchmarks.md). Each caller bounds its
calls with ``asyncio.timeout`` (a timer, no task); a command cut short closes its connection.

One such client per facade, shared by both and closed by the facade (the other Redis client, the
facade's own, keeps redis-py's timeouts for everything that is not on a request's path)."""

from __future__ import annotations

from typing import Any


def untimed_redis(url: str) -> Any:
    # Imported here: a process without Redis configured never loads the client.
    from redis.asyncio import Redis

    return Redis.from_url(url, socket_timeout=None)
