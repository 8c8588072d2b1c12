"""Who the load acts as: the tenants, keys, namespaces and users it spreads over.

Either the plan that loadtests/seed.py writes (``MEMVAULT_LOADTEST_PLAN``: a JSON file holding API
keys, so it is written 0600 outside the repository), or one existing key for any deployment:
``MEMVAULT_API_KEY`` (read and write scopes), ``MEMVAULT_LOADTEST_NAMESPACES`` (comma-separated,
default ``default``) and optionally ``MEMVAULT_LOADTEST_USERS``. ``MEMVAULT_LOADTEST_THINK_S``: each
simulated user waits up to this many seconds between requests (default 0: a closed loop, which is
what measures capacity).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Tenant:
    name: str
    key: str
    namespaces: list[str]
    users: list[str]


@dataclass
class Identity:
    """One simulated agent: its tenant, namespace, end user and conversation."""

    tenant: Tenant
    namespace: str
    user_id: str
    session_id: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tenant.key}"}

    def new_session(self) -> None:
        self.session_id = f"lt-{uuid.uuid4().hex[:12]}"


def _csv(value: str | None, default: list[str]) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()] if value else default


@cache
def tenants() -> list[Tenant]:
    plan = os.environ.get("MEMVAULT_LOADTEST_PLAN")
    if plan:
        data: dict[str, Any] = json.loads(Path(plan).read_text())
        return [Tenant(t["name"], t["key"], t["namespaces"], t["users"]) for t in data["tenants"]]
    key = os.environ.get("MEMVAULT_API_KEY")
    if not key:
        raise SystemExit("set MEMVAULT_LOADTEST_PLAN (from loadtests/seed.py) or MEMVAULT_API_KEY")
    namespaces = _csv(os.environ.get("MEMVAULT_LOADTEST_NAMESPACES"), ["default"])
    users = _csv(os.environ.get("MEMVAULT_LOADTEST_USERS"), [f"loadtest-user-{i}" for i in range(4)])
    return [Tenant("from-env", key, namespaces, users)]


_counter = itertools.count()


def identity(pool: list[Tenant] | None = None, rng: random.Random | None = None) -> Identity:
    """The next agent, tenants taken in turn so that every tenant gets its share of the users."""
    pool = pool or tenants()
    rng = rng or random.Random()
    tenant = pool[next(_counter) % len(pool)]
    who = Identity(tenant, rng.choice(tenant.namespaces), rng.choice(tenant.users), "")
    who.new_session()
    return who


def noisy_and_quiet() -> tuple[list[Tenant], list[Tenant]]:
    """The first tenant floods; the others are measured. One tenant alone plays both parts."""
    pool = tenants()
    return pool[:1], (pool[1:] or pool)


def think_s() -> float:
    return float(os.environ.get("MEMVAULT_LOADTEST_THINK_S", "0"))


def tour(user: Any) -> None:
    """With MEMVAULT_LOADTEST_TOUR=1 (the smoke test), each user first runs every one of its tasks
    once, so that a short run sees every operation however rare its weight."""
    if os.environ.get("MEMVAULT_LOADTEST_TOUR") == "1":
        for fn in dict.fromkeys(user.tasks):
            fn(user)


# The longest pause a refusal may ask for; a server asking for more is still retried after this.
MAX_BACKOFF_S = 10.0


def backoff_s(status: int, headers: Any) -> float:
    """How long a refused request (503 `overloaded`, 429 a rate limit) asks the client to wait, from
    its Retry-After. A simulated agent waits it out, as the SDK and well-behaved clients do: an
    agent that retried at once would measure how fast the server can say no, not its capacity."""
    if status not in (429, 503):
        return 0.0
    try:
        return min(MAX_BACKOFF_S, max(0.0, float(headers.get("retry-after") or 0)))
    except ValueError:
        return 1.0
