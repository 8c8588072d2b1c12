"""CPU per request of reads that show memories: a list page, a search with its hits' session
neighbours. Before 2026-12-07 every such read loaded each memory's vector (1,540 bytes, out of
line in most rows, parsed from text in Python) and word index; run it with ``PYTHONPATH`` at two
checkouts' ``services``, alternating, to compare them.

httpx over ASGI in the same process, so a request's CPU includes the client's; PostgreSQL's is
its postmaster's and its backends' (``tree_cpu``). From the repo root:

    cd loadtests && HF_HUB_OFFLINE=1 PYTHONPATH=../services ../.venv/bin/python bench_vectors.py \
        --requests 300 --rounds 4
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

from harness import cpu_per_request, embedded_app, postmaster_of


async def main(args: argparse.Namespace) -> None:
    import httpx

    from memvault.memories.schemas import MemoryIn
    from memvault.principal import Principal

    async with embedded_app() as stack:
        api = stack.api
        postmaster = await postmaster_of(api)
        t = await api.create_tenant("vectors-bench")
        p = Principal.system(t.id, subject="bench")
        await api.store_many(
            p,
            t.namespace,
            [
                MemoryIn(content=f"Note {i}: Kenji met person {i} in city {i % 17}.", session_id=f"s{i // 10}")
                for i in range(100)
            ],
        )
        base = f"/v1/namespaces/{t.namespace}"
        headers = {"Authorization": f"Bearer {t.api_key}"}
        calls = {
            "list (20)": ("GET", f"{base}/memories?limit=20", None),
            "search, neighbours 2 (cached query)": (
                "POST",
                f"{base}/search",
                {"query": "where did Kenji meet person 12", "neighbours": 2},
            ),
        }
        transport = httpx.ASGITransport(app=stack.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            results: dict[str, list[tuple[float, float, float]]] = {}
            for name, request in calls.items():
                await cpu_per_request(client, postmaster, request, headers, 30)  # warm: plans, caches, the pool
                for _ in range(args.rounds):
                    results.setdefault(name, []).append(
                        await cpu_per_request(client, postmaster, request, headers, args.requests)
                    )
    print(f"{args.requests} requests x {args.rounds} rounds, medians of the rounds\n")
    print("| request | app + client CPU ms | PostgreSQL CPU ms | total | p50 ms |")
    print("|---|---:|---:|---:|---:|")
    for name in calls:
        cpu, pg, wall = (statistics.median(r[i] for r in results[name]) for i in range(3))
        print(f"| {name} | {cpu:.2f} | {pg:.2f} | {cpu + pg:.2f} | {wall:.2f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=6)
    asyncio.run(main(parser.parse_args()))
