"""Searches of a namespace whose memories are all in one session: an agent that keeps one
``session_id`` for good. Each search reads the session neighbours of its best candidates (the
context channel) and, with ``--neighbours``, of its hits; each of those reads must take a few rows
of the session, not all of them (migration 0039, docs/benchmarks.md).

    HF_HUB_OFFLINE=1 PYTHONPATH=services .venv/bin/python loadtests/quality/long_session.py \\
        --turns 5000 --queries 40 [--neighbours 2] [--sessions 1]

Stores ``--turns`` LoCoMo turns (all ten conversations' turns, in order, repeated as needed) in
``--sessions`` sessions through the facade (one batch of 100 at a time, so through the write
path), then asks ``--queries`` LoCoMo questions, each twice (the second with its embedding
cached), and prints the server-side ``sql``, ``neighbours`` and ``total`` ms, p50 and p95, of
the second asks. Run it with ``PYTHONPATH`` at two checkouts' ``services`` to compare them."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # loadtests/: the shared harness
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import DEFAULT_DATA, embedded_app, pct, turns_of
from protocol import questions_of


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--sessions", type=int, default=1, help="the turns split evenly over this many sessions")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--neighbours", type=int, default=0, help="SearchIn.neighbours")
    parser.add_argument("--seed", type=int, default=4)
    args = parser.parse_args()

    from memvault.memories.schemas import MemoryIn
    from memvault.principal import Principal
    from memvault.retrieval.schemas import SearchIn

    convs = json.loads(args.data.read_text())
    texts = [t["content"] for c in convs for t in turns_of(c)]
    questions = [q.text for c in convs for q in questions_of(c)]
    random.Random(args.seed).shuffle(questions)
    per_session = -(-args.turns // args.sessions)
    rows: list[dict[str, float]] = []
    async with embedded_app("memvault-long-session-") as stack:
        api = stack.api
        tenant = await api.create_tenant("long-session")
        p = Principal.system(tenant.id, subject="bench")
        t0 = time.perf_counter()
        for start in range(0, args.turns, 100):
            batch = [
                MemoryIn(content=texts[i % len(texts)], type="event", session_id=f"thread-{i // per_session}")
                for i in range(start, min(start + 100, args.turns))
            ]
            await api.store_many(p, tenant.namespace, batch)
        stored_s = time.perf_counter() - t0
        for text in questions[: args.queries]:
            body = SearchIn(query=text, limit=10, neighbours=args.neighbours)
            await api.search(p, tenant.namespace, body)  # the query's embedding cached
            out = await api.search(p, tenant.namespace, body)
            rows.append(out.metrics.timings_ms)

    print(
        f"{args.turns:,} turns in {args.sessions} session(s) (stored in {stored_s:.0f} s); {args.queries} questions, "
        f"neighbours {args.neighbours}; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    print()
    print("| server-side ms | p50 | p95 | mean |")
    print("|---|---|---|---|")
    for stage in ("sql", "neighbours", "total"):
        xs = [r[stage] for r in rows if stage in r]
        if xs:
            print(f"| {stage} | {pct(xs, 50):.1f} | {pct(xs, 95):.1f} | {statistics.fmean(xs):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
