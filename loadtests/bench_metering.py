"""What usage metering adds to a cached search: the same search over HTTP (ASGI, the whole
gateway) with the metering gate on and off, in alternating blocks of one run, Redis on.

    HF_HUB_OFFLINE=1 PYTHONPATH=services .venv/bin/python loadtests/bench_metering.py \\
        [--redis redis://127.0.0.1:6379/0] [--calls 2000] [--block 100]

The query is the same every time, so its embedding comes from the query cache (a cached search);
the buckets are written by the meter's own writer every 2 s, as in production. Off means the
metering gate is taken out of the facade's gates (the door middleware stays: a contextvar set per
request). Prints p50/p95 for each and the difference of the p50s.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import httpx
from harness import embedded_app, pct


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--calls", type=int, default=2000, help="searches per arm")
    parser.add_argument("--block", type=int, default=100, help="searches in a row before switching arms")
    args = parser.parse_args()

    from memvault.metering.meter import UsageMeter

    async with embedded_app("memvault-bench-metering-", redis_url=args.redis) as stack:
        api = stack.api
        tenant = await api.create_tenant("bench-metering")
        headers = {"Authorization": f"Bearer {tenant.api_key}"}
        transport = httpx.ASGITransport(app=stack.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench", headers=headers) as http:
            ns = f"/v1/namespaces/{tenant.namespace}"
            batch = [
                {"content": f"Note {i}: the team met about the garden project and topic {i % 17}."} for i in range(200)
            ]
            r = await http.post(f"{ns}/memories/batch", json={"memories": batch})
            r.raise_for_status()
            gates = list(api._gates)
            without = [g for g in gates if not isinstance(g, UsageMeter)]
            times: dict[str, list[float]] = {"on": [], "off": []}

            async def search(n: int, arm: str) -> None:
                api._gates[:] = gates if arm == "on" else without
                for _ in range(n):
                    started = time.perf_counter()
                    r = await http.post(f"{ns}/search", json={"query": "what about the garden project?", "limit": 10})
                    times[arm].append((time.perf_counter() - started) * 1000)
                    r.raise_for_status()

            await search(200, "on")  # warm-up, not counted
            await search(200, "off")
            times = {"on": [], "off": []}
            for i in range(0, args.calls, args.block):
                for arm in ("on", "off") if (i // args.block) % 2 == 0 else ("off", "on"):
                    await search(min(args.block, args.calls - i), arm)
            api._gates[:] = gates
            # The gate alone, without the search's noise: enter, count and leave, as a REST call does.
            from memvault.metering.tally import through
            from memvault.operations import Operation
            from memvault.principal import Principal

            meter = next(g for g in gates if isinstance(g, UsageMeter))
            p = Principal.system(tenant.id)
            op = Operation("search", "search")
            loops = 20_000
            with through("rest"):
                started = time.perf_counter()
                for _ in range(loops):
                    async with meter.admit(p, op):
                        pass
                gate_us = (time.perf_counter() - started) / loops * 1e6
    on, off = times["on"], times["off"]
    print(f"{len(on)} cached searches per arm, blocks of {args.block}, Redis {args.redis}\n")
    print("| metering | p50 ms | p95 ms |")
    print("|---|---|---|")
    print(f"| on | {pct(on, 50):.2f} | {pct(on, 95):.2f} |")
    print(f"| off | {pct(off, 50):.2f} | {pct(off, 95):.2f} |")
    print(f"\nadded p50: {pct(on, 50) - pct(off, 50):+.3f} ms")
    print(f"the gate alone: {gate_us:.1f} µs per operation ({loops} in a row)")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
