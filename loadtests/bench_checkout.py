"""CPU per request of what every request does before its operation: the app pool's checkouts and
the API key's lookup. A/B in one process, rounds alternating:

- ``before``: SQLAlchemy's ``pool_pre_ping`` (a ping on every checkout) and the key's lookup in a
  transaction (BEGIN, the lookup, COMMIT), as memvault did up to 2026-12-06;
- ``after``: a ping only for a connection idle a second or more, the lookup alone in autocommit
  (db/session.py ``ping_when_idle``, ``Database.lookup``).

The client is httpx over ASGI in the same process, so a request's CPU includes the client's (the
same for both); PostgreSQL's is its postmaster's and its backends' (``tree_cpu``). From the repo root:

    HF_HUB_OFFLINE=1 PYTHONPATH=services .venv/bin/python loadtests/bench_checkout.py --requests 400 --rounds 6
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from typing import Any

from harness import cpu_per_request, embedded_app, postmaster_of


def use(api: Any, variant: str) -> None:
    db = api._db
    db.app_engine.sync_engine.pool._pre_ping = variant == "before"
    db.lookup = db.unscoped if variant == "before" else type(db).lookup.__get__(db)


async def main(args: argparse.Namespace) -> None:
    import httpx

    from memvault.principal import Principal

    async with embedded_app() as stack:
        api = stack.api
        postmaster = await postmaster_of(api)
        t = await api.create_tenant("checkout-bench")
        from memvault.memories.schemas import MemoryIn

        p = Principal.system(t.id, subject="bench")
        stored = await api.store_many(
            p, t.namespace, [MemoryIn(content=f"Note {i}: Kenji met person {i} in city {i % 17}.") for i in range(100)]
        )
        base = f"/v1/namespaces/{t.namespace}"
        headers = {"Authorization": f"Bearer {t.api_key}"}
        calls = {
            "get": ("GET", f"{base}/memories/{stored[0].id}", None),
            "list": ("GET", f"{base}/memories?limit=20", None),
            "search (cached query)": ("POST", f"{base}/search", {"query": "where did Kenji meet person 12"}),
        }
        transport = httpx.ASGITransport(app=stack.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
            for name, request in calls.items():
                await cpu_per_request(client, postmaster, request, headers, 30)  # warm: plans, caches, the pool
                for rnd in range(args.rounds):
                    for variant in ("before", "after") if rnd % 2 == 0 else ("after", "before"):
                        use(api, variant)
                        results.setdefault((name, variant), []).append(
                            await cpu_per_request(client, postmaster, request, headers, args.requests)
                        )
        use(api, "after")
    print(f"{args.requests} requests x {args.rounds} rounds per variant, medians of the rounds\n")
    print("| request | variant | app + client CPU ms | PostgreSQL CPU ms | total | p50 ms | after / before |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name in calls:
        totals = {}
        for variant in ("before", "after"):
            rows = results[(name, variant)]
            cpu, pg, wall = (statistics.median(r[i] for r in rows) for i in range(3))
            totals[variant] = cpu + pg
            ratio = f"{totals['after'] / totals['before']:.2f}" if variant == "after" else ""
            print(f"| {name} | {variant} | {cpu:.2f} | {pg:.2f} | {cpu + pg:.2f} | {wall:.2f} | {ratio} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=6)
    asyncio.run(main(parser.parse_args()))
