"""Writes on the local Citus cluster against single-node PostgreSQL on the same machine (issue 26):
`store` and `store_many` (20 memories) through the facade, in alternating blocks of one run.

    HF_HUB_OFFLINE=1 PYTHONPATH=services .venv/bin/python loadtests/bench_citus.py \\
        [--redis redis://127.0.0.1:6379/0] [--calls 300] [--batches 30] [--block 50]

Needs infra/scripts/build_citus.sh. The cluster is the one `memvault cluster up --workers 2`
starts (coordinator and two workers, each its own PostgreSQL), in a temp folder; the single node
is the embedded server. The embedder returns a fixed vector (bench_webhook_outbox.FixedEmbedder),
so the figures are the write path's: on one 2-core machine three servers share the cores, and the
coordinator adds a hop to every statement, so the cluster cannot be faster here. Prints p50/p95
per arm and the ratios. Search is not measured: listing and searching do not run on Citus yet
(docs/scaling.md).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import tempfile
import time
from pathlib import Path

from bench_webhook_outbox import FixedEmbedder
from harness import embedded_app, load_embedder, pct


def free_ports(count: int) -> int:
    for base in range(21000, 40000, count):
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free ports")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--calls", type=int, default=300, help="single stores per arm")
    parser.add_argument("--batches", type=int, default=30, help="store_many calls (20 memories) per arm")
    parser.add_argument("--block", type=int, default=50, help="calls in a row before switching arms")
    args = parser.parse_args()

    from memvault.app import create_app
    from memvault.cluster import local
    from memvault.config import Settings
    from memvault.db import migrate
    from memvault.db.urls import resolve
    from memvault.memories.schemas import MemoryIn
    from memvault.principal import Principal

    folder = Path(tempfile.mkdtemp(prefix="memvault-bench-citus-"))
    try:
        cluster = local.up(folder, workers=2, port=free_ports(3))
        urls = resolve(cluster.uri(), None, "memvault_app", embedded=True)
        migrate.upgrade(urls.owner, "memvault_app", allow_login=True)
        embedder = FixedEmbedder(load_embedder())
        conf = Settings(
            _env_file=None,
            database_url=cluster.uri(),
            redis_url=args.redis,
            scheduler_interval_s=0,
            job_sweep_interval_s=0,
        )
        citus_app = create_app(conf, urls=urls, embedder=embedder)
        async with (
            embedded_app("memvault-bench-citus-single-", redis_url=args.redis, wrap_embedder=FixedEmbedder) as single,
            citus_app.router.lifespan_context(citus_app),
        ):
            apis = {"single node": single.api, "citus": citus_app.state.api}
            tenants = {arm: await api.create_tenant(f"bench-{arm.replace(' ', '-')}") for arm, api in apis.items()}
            times: dict[str, dict[str, list[float]]] = {kind: {arm: [] for arm in apis} for kind in ("store", "batch")}
            seq = 0

            async def run(kind: str, arm: str, n: int) -> None:
                nonlocal seq
                api, tenant = apis[arm], tenants[arm]
                p = Principal.system(tenant.id, subject="bench")
                for _ in range(n):
                    seq += 1
                    started = time.perf_counter()
                    if kind == "store":
                        await api.store(p, tenant.namespace, MemoryIn(content=f"Note {seq} about topic {seq % 17}."))
                    else:
                        bodies = [MemoryIn(content=f"Note {seq}.{i} about topic {i % 17}.") for i in range(20)]
                        await api.store_many(p, tenant.namespace, bodies)
                    times[kind][arm].append((time.perf_counter() - started) * 1000)

            for arm in apis:  # warm-up, not counted
                await run("store", arm, 50)
                await run("batch", arm, 5)
            times = {kind: {arm: [] for arm in apis} for kind in ("store", "batch")}
            order = list(apis)
            for kind, total in (("store", args.calls), ("batch", args.batches)):
                block = args.block if kind == "store" else max(1, args.block // 10)
                for i in range(0, total, block):
                    for arm in order if (i // block) % 2 == 0 else order[::-1]:
                        await run(kind, arm, min(block, total - i))
    finally:
        try:
            local.down(folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    print("fixed-vector embedder; coordinator + 2 workers vs one node, same machine, interleaved\n")
    print(
        "| write | single node p50 / p95 ms | citus p50 / p95 ms | citus / single (p50) | memories/s single / citus |"
    )
    print("|---|---|---|---|---|")
    for kind, per in (("store", 1), ("batch", 20)):
        s, c = times[kind]["single node"], times[kind]["citus"]
        rate_s, rate_c = per * 1000 / pct(s, 50), per * 1000 / pct(c, 50)
        print(
            f"| {kind if kind == 'store' else 'store_many (20)'} | {pct(s, 50):.2f} / {pct(s, 95):.2f} "
            f"| {pct(c, 50):.2f} / {pct(c, 95):.2f} | {pct(c, 50) / pct(s, 50):.2f} | {rate_s:.0f} / {rate_c:.0f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
