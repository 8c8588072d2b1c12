"""Writes and searches on the local Citus cluster against single-node PostgreSQL on the same
machine (issue 26): `store`, `store_many` (20 memories) and `search` through the facade, in
alternating blocks of one run.

    HF_HUB_OFFLINE=1 PYTHONPATH=services .venv/bin/python loadtests/bench_citus.py \\
        [--redis redis://127.0.0.1:6379/0] [--calls 300] [--batches 30] [--searches 200] [--block 50]

Needs infra/scripts/build_citus.sh. The cluster is the one `memvault cluster up --workers 2`
starts (coordinator and two workers, each its own PostgreSQL), in a temp folder; the single node
is the embedded server. Writes embed to a fixed vector (as bench_webhook_outbox.FixedEmbedder), so
the figures are the write path's: on one 2-core machine three servers share the cores, and the
coordinator adds a hop to every statement, so the cluster cannot be faster here. Prints p50/p95
per arm and the ratios.

Search: one LoCoMo conversation (419 turns, harness.DEFAULT_DATA) stored in a tenant of each arm
with the model's vectors, its questions asked in turn (limit 10), the query vectors computed once
before the timed part (CachedEmbedder), so the figures are the database's and the app's, not the
model's.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import tempfile
import time
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

from harness import DEFAULT_DATA, embedded_app, load_embedder, pct, sessions


class CachedEmbedder:
    """The model's vectors for texts it was given beforehand (``prime``); a fixed vector for others
    (the write arms' notes), so that no timed call waits for the model."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.dim = inner.dim
        self.model_id = inner.model_id
        self._known: dict[str, list[float]] = {}

    async def prime(self, texts: Sequence[str], queries: Sequence[str]) -> None:
        for text, vector in zip(texts, await self._inner.embed(list(texts)), strict=True):
            self._known[text] = vector
        for q in queries:
            self._known["?" + q] = await self._inner.embed_query(q)

    async def embed(self, texts: Sequence[str], *, tenant: Hashable | None = None) -> list[list[float]]:
        return [self._known.get(t, [1.0 / self.dim**0.5] * self.dim) for t in texts]

    async def embed_query(self, text: str) -> list[float]:
        return self._known.get("?" + text, [1.0 / self.dim**0.5] * self.dim)

    async def aclose(self) -> None:
        return None


def locomo() -> tuple[list[tuple[str, str]], list[str]]:
    """(content, session) of each turn of the first conversation, and its questions."""
    import json
    import os

    conv = json.loads(Path(os.environ.get("MEMVAULT_LOCOMO") or DEFAULT_DATA).read_text())[0]
    turns = [(f"{t['speaker']}: {t['text']}", f"session-{n}") for n, _, ts in sessions(conv) for t in ts]
    return turns, [qa["question"] for qa in conv["qa"]]


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
    parser.add_argument("--searches", type=int, default=200, help="searches per arm")
    parser.add_argument("--block", type=int, default=50, help="calls in a row before switching arms")
    args = parser.parse_args()

    from memvault.app import create_app
    from memvault.cluster import local
    from memvault.config import Settings
    from memvault.db import migrate
    from memvault.db.urls import resolve
    from memvault.memories.schemas import MemoryIn
    from memvault.principal import Principal
    from memvault.retrieval.schemas import SearchIn

    turns, questions = locomo()
    model = load_embedder()
    shared_embedder = CachedEmbedder(model)
    await shared_embedder.prime([c for c, _ in turns], questions)

    folder = Path(tempfile.mkdtemp(prefix="memvault-bench-citus-"))
    try:
        cluster = local.up(folder, workers=2, port=free_ports(3))
        urls = resolve(cluster.uri(), None, "memvault_app", embedded=True)
        migrate.upgrade(urls.owner, "memvault_app", allow_login=True)
        embedder = shared_embedder
        conf = Settings(
            _env_file=None,
            database_url=cluster.uri(),
            redis_url=args.redis,
            scheduler_interval_s=0,
            job_sweep_interval_s=0,
        )
        citus_app = create_app(conf, urls=urls, embedder=embedder)
        async with (
            embedded_app(
                "memvault-bench-citus-single-", redis_url=args.redis, wrap_embedder=lambda _: shared_embedder
            ) as single,
            citus_app.router.lifespan_context(citus_app),
        ):
            apis = {"single node": single.api, "citus": citus_app.state.api}
            tenants = {arm: await api.create_tenant(f"bench-{arm.replace(' ', '-')}") for arm, api in apis.items()}
            kinds = ("store", "batch", "search")
            times: dict[str, dict[str, list[float]]] = {kind: {arm: [] for arm in apis} for kind in kinds}
            seq = 0
            for arm, api in apis.items():
                p = Principal.system(tenants[arm].id, subject="bench")
                bodies = [MemoryIn(content=c, session_id=sid) for c, sid in turns]
                await api.store_many(p, tenants[arm].namespace, bodies)

            async def run(kind: str, arm: str, n: int) -> None:
                nonlocal seq
                api, tenant = apis[arm], tenants[arm]
                p = Principal.system(tenant.id, subject="bench")
                for _ in range(n):
                    seq += 1
                    started = time.perf_counter()
                    if kind == "search":
                        await api.search(p, tenant.namespace, SearchIn(query=questions[seq % len(questions)], limit=10))
                    elif kind == "store":
                        await api.store(p, tenant.namespace, MemoryIn(content=f"Note {seq} about topic {seq % 17}."))
                    else:
                        bodies = [MemoryIn(content=f"Note {seq}.{i} about topic {i % 17}.") for i in range(20)]
                        await api.store_many(p, tenant.namespace, bodies)
                    times[kind][arm].append((time.perf_counter() - started) * 1000)

            for arm in apis:  # warm-up, not counted
                await run("search", arm, 20)
                await run("store", arm, 50)
                await run("batch", arm, 5)
            times = {kind: {arm: [] for arm in apis} for kind in kinds}
            order = list(apis)
            # Searches first: the notes the write arms add afterwards would change what they read.
            for kind, total in (("search", args.searches), ("store", args.calls), ("batch", args.batches)):
                block = args.block if kind == "store" else max(1, args.block // 10)
                for i in range(0, total, block):
                    for arm in order if (i // block) % 2 == 0 else order[::-1]:
                        await run(kind, arm, min(block, total - i))
    finally:
        try:
            local.down(folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    print("vectors computed before the timed part; coordinator + 2 workers vs one node, same machine, interleaved\n")
    s, c = times["search"]["single node"], times["search"]["citus"]
    print("| search (LoCoMo, limit 10) | single node p50 / p95 ms | citus p50 / p95 ms | citus / single (p50, p95) |")
    print("|---|---|---|---|")
    print(
        f"| search | {pct(s, 50):.2f} / {pct(s, 95):.2f} | {pct(c, 50):.2f} / {pct(c, 95):.2f} "
        f"| {pct(c, 50) / pct(s, 50):.2f}, {pct(c, 95) / pct(s, 95):.2f} |\n"
    )
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
