"""Query embeddings under concurrency: K calls of ``embed_query`` with texts never seen before (the
query cache never answers), by C callers at once, on the local MiniLM model (ONNX Runtime).

    HF_HUB_OFFLINE=1 PYTHONPATH=services .venv/bin/python loadtests/bench_query_embedding.py \\
        [--calls 256] [--concurrency 1 8 32]

Issue 25's load test found the search query's embedding to be where requests queue: one ONNX
session, one text per run. Run it against two checkouts back to back (PYTHONPATH picks which
memvault is measured) and compare the ratios; on a shared machine the absolute times move.
Prints a markdown table: calls/s, the process's CPU time per call (steadier than wall time when
other processes share the cores), and p50/p95 of one call's time (its wait included).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from typing import TYPE_CHECKING

from harness import MODEL, pct

if TYPE_CHECKING:
    from memvault.embeddings.base import Embedder

SUBJECTS = ["Caroline", "the user", "Melanie", "the staging database", "the quarterly report", "Ana"]
ASKS = [
    "what did {s} say about {n}?",
    "when does {s} plan the trip to Lyon, item {n}",
    "which hobbies did {s} pick up after moving to the new city in spring, note {n}?",
    "summarise everything {s} mentioned about adoption agencies, the counselling course, "
    "the support group and the charity run in the last three months ({n})",
]


async def measure(embedder: Embedder, queries: itertools.count[int], calls: int, concurrency: int) -> dict[str, float]:
    texts = (ASKS[n % len(ASKS)].format(s=SUBJECTS[n % len(SUBJECTS)], n=n) for n in queries)
    times: list[float] = []

    async def caller() -> None:
        for text in texts:  # a shared generator: each caller takes the next new text
            started = time.perf_counter()
            await embedder.embed_query(text)
            times.append((time.perf_counter() - started) * 1000)
            if len(times) >= calls:
                return

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {
        "calls/s": len(times) / wall,
        "cpu": cpu * 1000 / len(times),
        "p50": pct(times, 50),
        "p95": pct(times, 95),
    }


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=256, help="calls per concurrency level")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    args = parser.parse_args()

    import memvault
    from memvault.embeddings.local import LocalEmbedder

    embedder = LocalEmbedder(MODEL, dim=384)
    await asyncio.to_thread(embedder.load)
    queries = itertools.count()
    await measure(embedder, queries, 16, 4)  # warm-up: first runs of the session are slower
    print(f"memvault from {memvault.__file__}, {args.calls} calls per row, runtime {embedder.runtime}\n")
    print("| concurrency | calls/s | CPU ms per call | p50 ms | p95 ms |")
    print("|---|---|---|---|---|")
    for c in args.concurrency:
        r = await measure(embedder, queries, args.calls, c)
        print(f"| {c} | {r['calls/s']:.1f} | {r['cpu']:.1f} | {r['p50']:.0f} | {r['p95']:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
