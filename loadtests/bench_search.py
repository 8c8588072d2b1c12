"""Write and search benchmark on LoCoMo, through the facade and over HTTP (ASGI), on the embedded
PostgreSQL and the local MiniLM model.

    .venv/bin/python loadtests/bench_search.py [--conversations 10] [--questions 0] [--weights JSON ...]

Every conversation turn becomes a memory (``Speaker: text``, its session and dia_id kept), one
namespace per conversation; then every answerable question (categories 1-4) is searched and we
count whether an evidence turn is among the first k results. LoCoMo is read in place from
../shared/datasets (non-commercial licence: never copied into the repo).

Prints markdown tables: write throughput, search latency percentiles (with the query embedding
uncached and cached), and retrieval quality.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

from harness import DEFAULT_DATA, embedded_app, pct, turns_of


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--questions", type=int, default=0, help="cap on questions (0 = all answerable)")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--base-weights", default=None, help="fusion weights of the main passes (default: server)")
    parser.add_argument(
        "--weights",
        action="append",
        default=[],
        help="extra quality pass with these fusion weights, e.g. '{\"recency\": 0}' (repeatable; runs after the "
        "default passes, so access counts then include theirs)",
    )
    args = parser.parse_args()

    import httpx

    from memvault.memories.schemas import MemoryIn
    from memvault.namespaces.schemas import NamespaceIn
    from memvault.principal import Principal
    from memvault.retrieval.schemas import SearchIn

    data = json.loads(args.data.read_text())[: args.conversations]

    async with embedded_app() as stack:
        app, api, embedder = stack.app, stack.api, stack.embedder
        tenant = await api.create_tenant(f"bench-{uuid.uuid4().hex[:8]}")
        p = Principal.system(tenant.id, subject="bench")

        # ---- writes ----
        n_written, write_s, embed_s = 0, 0.0, 0.0
        for conv in data:
            ns = conv["sample_id"]
            await api.create_namespace(p, NamespaceIn(name=ns))
            turns = turns_of(conv)
            for i in range(0, len(turns), args.batch):
                batch = [MemoryIn(**t) for t in turns[i : i + args.batch]]
                t0 = time.perf_counter()
                await embedder.embed([b.content for b in batch])
                embed_s += time.perf_counter() - t0
                t0 = time.perf_counter()
                await api.store_many(p, ns, batch)
                write_s += time.perf_counter() - t0
                n_written += len(batch)

        # ---- questions ----
        questions = [
            (conv["sample_id"], q)
            for conv in data
            for q in conv["qa"]
            if q.get("category") in (1, 2, 3, 4) and q.get("evidence")
        ]
        if args.questions:
            questions = questions[: args.questions]

        async def run_pass(
            weights: dict[str, float] | None = None,
        ) -> tuple[list[float], list[float], list[float], list[int | None]]:
            total, emb, sql, ranks = [], [], [], []
            for ns, q in questions:
                t0 = time.perf_counter()
                out = await api.search(p, ns, SearchIn(query=q["question"], limit=10, weights=weights))
                total.append((time.perf_counter() - t0) * 1000)
                emb.append(out.metrics.timings_ms["embed"])
                sql.append(out.metrics.timings_ms["sql"])
                evidence = set(q["evidence"])
                rank = next(
                    (i + 1 for i, r in enumerate(out.results) if r.memory.metadata.get("dia_id") in evidence), None
                )
                ranks.append(rank)
            return total, emb, sql, ranks

        base = json.loads(args.base_weights) if args.base_weights else None
        cold = await run_pass(base)
        warm = await run_pass(base)  # the query embeddings now come from the LRU cache
        extra = [(w, (await run_pass(json.loads(w)))[3]) for w in args.weights]

        # ---- over HTTP (ASGI, no network) ----
        transport = httpx.ASGITransport(app=app)
        http_ms: list[float] = []
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            headers = {"Authorization": f"Bearer {tenant.api_key}"}
            for ns, q in questions[:300]:
                t0 = time.perf_counter()
                r = await client.post(f"/v1/namespaces/{ns}/search", json={"query": q["question"]}, headers=headers)
                http_ms.append((time.perf_counter() - t0) * 1000)
                r.raise_for_status()

    def row(name: str, xs: list[float]) -> str:
        return f"| {name} | {pct(xs, 50):.1f} | {pct(xs, 95):.1f} | {pct(xs, 99):.1f} | {statistics.mean(xs):.1f} |"

    def quality(ranks: list[int | None]) -> tuple[dict[int, float], float]:
        n = len(ranks)
        recall = {k: sum(1 for r in ranks if r is not None and r <= k) / n for k in (1, 5, 10)}
        return recall, sum(1 / r for r in ranks if r is not None) / n

    ranks = cold[3]
    n = len(ranks)
    recall, mrr = quality(ranks)
    print(f"memories: {n_written} in {len(data)} namespaces; questions: {n}\n")
    print("| write | value |\n|---|---|")
    print(f"| batch store, memories/s (batches of {args.batch}, embedding included) | {n_written / write_s:.0f} |")
    print(f"| embedding alone, texts/s | {n_written / embed_s:.0f} |")
    print(f"| share of store time spent embedding | {embed_s / write_s:.0%} |\n")
    print("| search latency (ms) | p50 | p95 | p99 | mean |\n|---|---|---|---|---|")
    print(row("facade, query embedding uncached", cold[0]))
    print(row("  of which embedding", cold[1]))
    print(row("  of which SQL", cold[2]))
    print(row("facade, query embedding cached", warm[0]))
    print(row("HTTP (ASGI) incl. auth, cached", http_ms))
    print()
    print("| quality (evidence turn in top k) | value |\n|---|---|")
    for k, v in recall.items():
        print(f"| recall@{k} | {v:.3f} |")
    print(f"| MRR@10 | {mrr:.3f} |")
    if extra:
        print("\n| weights (over the defaults) | recall@1 | recall@5 | recall@10 | MRR@10 |\n|---|---|---|---|---|")
        for w, r in extra:
            rec, m = quality(r)
            print(f"| `{w}` | {rec[1]:.3f} | {rec[5]:.3f} | {rec[10]:.3f} | {m:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
