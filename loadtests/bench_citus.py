"""Writes and searches on the local Citus cluster against single-node PostgreSQL on the same
machine (issue 26): `store`, `store_many` (20 memories) and `search` through the facade, in
alternating blocks of one run.

    HF_HUB_OFFLINE=1 PYTHONPATH=services .venv/bin/python loadtests/bench_citus.py \\
        [--redis redis://127.0.0.1:6379/0] [--calls 300] [--batches 30] [--searches 200] [--block 50] \\
        [--explain 50]

Needs infra/scripts/build_citus.sh. The cluster is the one `memvault cluster up --workers 2`
starts (coordinator and two workers, each its own PostgreSQL), in a temp folder; the single node
is the embedded server. Writes embed to a fixed vector (as bench_webhook_outbox.FixedEmbedder), so
the figures are the write path's: on one 2-core machine three servers share the cores, and the
coordinator adds a hop to every statement, so the cluster cannot be faster here. Prints p50/p95
per arm and the ratios.

Search: one LoCoMo conversation (419 turns, harness.DEFAULT_DATA) stored in a tenant of each arm
with the model's vectors, its questions asked in turn (limit 10), the query vectors computed once
before the timed part (CachedEmbedder), so the figures are the database's and the app's, not the
model's. Both arms are analysed after the seeding, as autovacuum would soon do.

`--explain N` then splits a search's time: its statements again under EXPLAIN ANALYZE (planning
and execution where the app runs them; on Citus also the workers' tasks), and the search
functions' calls and time on the workers (`track_functions`).
"""

from __future__ import annotations

import argparse
import asyncio
import re
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


async def explained(api: Any, tenant: Any, questions: Sequence[str]) -> dict[str, list[float]]:
    """Each search's statements as the app sent them, run again under EXPLAIN ANALYZE in a tenant
    transaction of the app's (client-side binding): per search, the milliseconds of the statements'
    planning and execution where the app runs them (the coordinator on Citus), and on Citus those of
    the tasks on the workers. What the statements cost beyond the tasks is the coordinator's own."""
    import psycopg
    from sqlalchemy import event

    from memvault.principal import Principal
    from memvault.retrieval.schemas import SearchIn

    times: dict[str, list[float]] = {"plan": [], "run": [], "task plan": [], "task run": []}
    p = Principal.system(tenant.id, subject="bench")
    engine = api._db.app_engine.sync_engine
    sent: list[tuple[str, Any]] = []

    def capture(_c: Any, _cur: Any, statement: str, params: Any, _ctx: Any, _many: bool) -> None:
        if statement.lstrip().upper().startswith(("WITH", "SELECT")) and "pg_" not in statement:
            sent.append((statement, params))

    for question in questions:
        sent.clear()
        event.listen(engine, "before_cursor_execute", capture)
        try:
            await api.search(p, tenant.namespace, SearchIn(query=question, limit=10))
        finally:
            event.remove(engine, "before_cursor_execute", capture)
        per = dict.fromkeys(times, 0.0)
        async with api._db.tenant_tx(tenant.id) as tx:
            raw = (await (await tx.session.connection()).get_raw_connection()).driver_connection
            cur = psycopg.AsyncClientCursor(raw)
            for statement, params in sent:
                await cur.execute("EXPLAIN (ANALYZE, SUMMARY) " + statement, params)
                for (line,) in await cur.fetchall():
                    found = re.match(r"(\s*)(?:->\s*)?(Planning|Execution) Time: ([\d.]+) ms", line)
                    if found:
                        key = ("task " if found[1] else "") + ("plan" if found[2] == "Planning" else "run")
                        per[key] += float(found[3])
        for key, value in per.items():
            times[key].append(value)
    return times


async def on_workers(cluster: Any, api: Any, tenant: Any, questions: Sequence[str]) -> list[tuple[str, float, float]]:
    """The searches of ``questions`` again with the workers counting their functions' calls and
    time: per search, each memvault function's calls and its own milliseconds (its statements'
    planning included: the shard-local versions plan each EXECUTE)."""
    import psycopg

    from memvault.principal import Principal
    from memvault.retrieval.schemas import SearchIn

    def each_worker(sql: str) -> list[tuple[str, int, float]]:
        rows = []
        for node in cluster.workers:
            with psycopg.connect(node.uri(), autocommit=True) as conn:
                cur = conn.execute(sql)
                rows += cur.fetchall() if cur.description else []
        return rows

    each_worker("ALTER SYSTEM SET track_functions = 'all'")
    each_worker("SELECT pg_reload_conf()")
    await asyncio.sleep(0.5)
    each_worker("SELECT pg_stat_reset()")

    p = Principal.system(tenant.id, subject="bench")
    for question in questions:
        await api.search(p, tenant.namespace, SearchIn(query=question, limit=10))
    # An idle backend reports what it counted at most 10 s later (PostgreSQL 15+).
    await asyncio.sleep(11)
    totals: dict[str, list[float]] = {}
    for name, calls, ms in each_worker(
        "SELECT funcname::text, calls, self_time FROM pg_stat_user_functions WHERE funcname LIKE 'memvault%'"
    ):
        total = totals.setdefault(name, [0.0, 0.0])
        total[0] += calls / len(questions)
        total[1] += ms / len(questions)
    return sorted(((n, c, t) for n, (c, t) in totals.items()), key=lambda row: -row[2])


def print_split(split: dict[str, dict[str, list[float]]]) -> None:
    print("\nthe search's statements under EXPLAIN ANALYZE, median ms per search")
    print("| arm | planning | execution | of which tasks: planning | tasks: execution | the rest |")
    print("|---|---|---|---|---|---|")
    for arm, t in split.items():
        plan, run, task_plan, task_run = (pct(t[k], 50) for k in ("plan", "run", "task plan", "task run"))
        rest = run - task_plan - task_run if task_run else 0.0
        print(f"| {arm} | {plan:.2f} | {run:.2f} | {task_plan:.2f} | {task_run:.2f} | {rest:.2f} |")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--calls", type=int, default=300, help="single stores per arm")
    parser.add_argument("--batches", type=int, default=30, help="store_many calls (20 memories) per arm")
    parser.add_argument("--searches", type=int, default=200, help="searches per arm")
    parser.add_argument("--block", type=int, default=50, help="calls in a row before switching arms")
    parser.add_argument(
        "--explain", type=int, default=0, help="then EXPLAIN ANALYZE this many searches' statements per arm"
    )
    args = parser.parse_args()

    import psycopg

    from memvault.app import create_app
    from memvault.cluster import local
    from memvault.config import Settings
    from memvault.db import migrate
    from memvault.db.urls import libpq, resolve
    from memvault.memories.schemas import MemoryIn
    from memvault.principal import Principal
    from memvault.retrieval.schemas import SearchIn

    turns, questions = locomo()
    model = load_embedder()
    shared_embedder = CachedEmbedder(model)
    await shared_embedder.prime([c for c, _ in turns], questions)

    split: dict[str, dict[str, list[float]]] = {}
    functions: list[tuple[str, float, float]] = []
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
            # As autovacuum would within a minute or two: without statistics a worker's shard of
            # freshly copied rows reads each candidate by the tenant's index instead of its key
            # (0.09 ms a row against 0.002 here), which is not the steady state to compare.
            for uri in (cluster.uri(), single.urls.owner):
                with psycopg.connect(libpq(uri), autocommit=True) as conn:
                    conn.execute("ANALYZE")

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
            if args.explain:
                for arm, api in apis.items():
                    split[arm] = await explained(api, tenants[arm], questions[: args.explain])
                functions = await on_workers(cluster, apis["citus"], tenants["citus"], questions[: args.explain])
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
    if args.explain:
        print_split(split)
        print("\nthe search's functions on the workers (track_functions), per search")
        print("| function | calls | ms |")
        print("|---|---|---|")
        for name, calls, ms in functions:
            print(f"| {name} | {calls:.1f} | {ms:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
