"""What one limited request's admission costs the server (issue 23's limit path), counted in
instructions so that a busy machine does not enter: a LimitGate over a plan with every rate and
the concurrency limited (a stub plan book, no PostgreSQL), ``n`` admissions against a real Redis,
each with the header windows read as at the REST door. Run it under valgrind twice and divide the
difference by the difference in ``n``:

    for n in 50 450; do PYTHONPATH=services valgrind --tool=callgrind \
        --callgrind-out-file=/tmp/cg-$n.out .venv/bin/python loadtests/bench_limit_admission.py \
        redis://127.0.0.1:6379/0 $n 2>&1 | grep Collected; done

(instructions per admission = (Collected at 450 - Collected at 50) / 400). Without valgrind it
prints the CPU and wall time per admission.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import time
import uuid
from typing import Any


async def main(url: str, n: int) -> None:
    from redis.asyncio import Redis

    from memvault.config import Settings
    from memvault.operations import Operation
    from memvault.plans.gate import LimitGate, reporting
    from memvault.plans.limits import PlanLimits
    from memvault.plans.repository import TenantPlan
    from memvault.principal import Principal

    rates = {
        f"{per}_{kind}_per_minute": 1_000_000 for per in ("key", "tenant") for kind in ("reads", "writes", "searches")
    }
    plan = TenantPlan("bench-limited", PlanLimits(concurrent_requests=64, **rates), {})

    class Book:
        async def of(self, tenant_id: uuid.UUID) -> TenantPlan:
            return plan

    redis = Redis.from_url(url)
    untimed = Redis.from_url(url, socket_timeout=None)
    # A/B against older code runs too: before the facade shared one, the gate made its own client.
    shared = (untimed,) if "untimed" in inspect.signature(LimitGate).parameters else ()
    gate = LimitGate(Settings(_env_file=None, redis_url=url), Book(), redis, *shared)  # type: ignore[arg-type]
    p = Principal(uuid.uuid4(), frozenset({"read"}), "key", key_id=uuid.uuid4())
    op = Operation("search", "search")

    async def admit(times: int) -> None:
        for _ in range(times):
            with reporting():
                async with gate.admit(p, op):
                    pass

    await admit(20)  # the script loaded, the connections open
    cpu, wall = time.process_time(), time.perf_counter()
    await admit(n)
    if n:
        print(
            f"{n} admissions: {(time.process_time() - cpu) / n * 1e6:.0f} µs CPU, "
            f"{(time.perf_counter() - wall) / n * 1e6:.0f} µs wall each"
        )
    await gate.aclose()
    close = getattr(gate, "close_storage", None)  # the gate's own client (24aea57 until it was shared)
    if close is not None:
        await close()
    await untimed.aclose()
    await redis.aclose()


def run(argv: list[str]) -> Any:
    return asyncio.run(main(argv[1], int(argv[2])))


if __name__ == "__main__":
    run(sys.argv)
