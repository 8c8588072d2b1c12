"""What a monthly cap costs a write: the metering gate with the write's cap check (take what it
is about to add, then put what it used in its place), for a tenant without the cap, with it and
Redis (the month shared by the replicas), and with it and no Redis (the process's own count);
then a whole store over HTTP (ASGI) for a tenant with and without the cap. Alternating blocks in
one run, Redis on.

    HF_HUB_OFFLINE=1 PYTHONPATH=services .venv/bin/python loadtests/bench_monthly_cap.py \\
        [--redis redis://127.0.0.1:6379/0] [--calls 4000] [--stores 300]
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
    parser.add_argument("--calls", type=int, default=4000, help="gate passes per arm")
    parser.add_argument("--block", type=int, default=200)
    parser.add_argument("--stores", type=int, default=300, help="stores over HTTP per arm")
    args = parser.parse_args()

    from memvault.metering.meter import UsageMeter
    from memvault.metering.tally import count, through
    from memvault.operations import Operation
    from memvault.principal import Principal

    async with embedded_app("memvault-bench-monthly-", redis_url=args.redis) as stack:
        api = stack.api
        free = await api.create_tenant("bench-uncapped")
        capped = await api.create_tenant("bench-capped")
        await api.set_tenant_plan(free.id, "unlimited", {})
        await api.set_tenant_plan(capped.id, "unlimited", {"embedded_tokens_per_month": 10**12})
        shared: UsageMeter = api._usage
        alone = UsageMeter(api._db, api._plans)
        op = Operation("store_memory", "write")

        async def gate(meter: UsageMeter, tenant_id: object) -> None:
            p = Principal.system(tenant_id)  # type: ignore[arg-type]
            async with meter.admit(p, op):
                await meter.require_monthly_room(p.tenant_id, "embedded_tokens_per_month", adding=60)
                count(tokens_embedded=57, memories_written=1)

        arms = {
            "no cap": lambda: gate(shared, free.id),
            "cap, Redis": lambda: gate(shared, capped.id),
            "cap, no Redis": lambda: gate(alone, capped.id),
        }
        wall: dict[str, list[float]] = {a: [] for a in arms}
        cpu: dict[str, float] = dict.fromkeys(arms, 0.0)
        with through("rest"):
            for arm in arms:  # warm-up
                for _ in range(100):
                    await arms[arm]()
            names = list(arms)
            for i in range(0, args.calls, args.block):
                for arm in names if (i // args.block) % 2 == 0 else reversed(names):
                    c0 = time.process_time()
                    for _ in range(args.block):
                        t0 = time.perf_counter()
                        await arms[arm]()
                        wall[arm].append((time.perf_counter() - t0) * 1e6)
                    cpu[arm] += time.process_time() - c0
        await alone.aclose()

        transport = httpx.ASGITransport(app=stack.app)
        stores: dict[str, list[float]] = {"no cap": [], "cap, Redis": []}
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as http:

            async def store(tenant: object, n: int, into: list[float]) -> None:
                headers = {"Authorization": f"Bearer {tenant.api_key}"}  # type: ignore[attr-defined]
                url = f"/v1/namespaces/{tenant.namespace}/memories"  # type: ignore[attr-defined]
                for i in range(n):
                    t0 = time.perf_counter()
                    r = await http.post(url, headers=headers, json={"content": f"Note {i}: the garden met {i % 13}."})
                    into.append((time.perf_counter() - t0) * 1000)
                    r.raise_for_status()

            await store(free, 20, [])
            await store(capped, 20, [])
            for i in range(0, args.stores, 25):
                order = [("no cap", free), ("cap, Redis", capped)]
                for arm, tenant in order if (i // 25) % 2 == 0 else reversed(order):
                    await store(tenant, min(25, args.stores - i), stores[arm])

    print(f"metering gate with a write's cap check, {args.calls} per arm, blocks of {args.block}, Redis {args.redis}\n")
    print("| tenant | p50 µs | p95 µs | CPU µs per call |")
    print("|---|---:|---:|---:|")
    for arm in arms:
        print(
            f"| {arm} | {pct(wall[arm], 50):.0f} | {pct(wall[arm], 95):.0f} | {cpu[arm] / len(wall[arm]) * 1e6:.0f} |"
        )
    print(f"\nwhole store over HTTP, {args.stores} per arm\n")
    print("| tenant | p50 ms | p95 ms |")
    print("|---|---:|---:|")
    for arm, values in stores.items():
        print(f"| {arm} | {pct(values, 50):.2f} | {pct(values, 95):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
