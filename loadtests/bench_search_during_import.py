"""Search latency while the same server imports: one task stores LoCoMo turns in batches of 100
(embedding included, as an import does) while searches run one at a time, each with a new query
(its embedding uncached). On the embedded PostgreSQL and the local MiniLM model.

    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/bench_search_during_import.py [--searches 80]

LoCoMo is read in place from ../shared/datasets (never copied). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path

from harness import DEFAULT_DATA, embedded_app, pct

sys.path.insert(0, str(Path(__file__).parent / "quality"))
from protocol import memories_of, questions_of


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--searches", type=int, default=80)
    parser.add_argument("--batch", type=int, default=100, help="memories per stored batch")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()

    from memvault.memories.schemas import MemoryIn
    from memvault.namespaces.schemas import NamespaceIn
    from memvault.principal import Principal
    from memvault.retrieval.schemas import SearchIn

    data = json.loads(args.data.read_text())
    turns = [m["content"] for c in data for m in memories_of(c)]
    questions = [q.text for c in data for q in questions_of(c)]
    random.Random(args.seed).shuffle(questions)

    async with embedded_app("memvault-import-bench-") as stack:
        api = stack.api
        tenant = await api.create_tenant("import-bench")
        p = Principal.system(tenant.id, subject="bench")
        await api.create_namespace(p, NamespaceIn(name="n"))
        await api.store_many(p, "n", [MemoryIn(content=t) for t in turns[:500]])

        async def search_all() -> list[float]:
            ms = []
            for q in questions[: args.searches]:
                started = time.perf_counter()
                await api.search(p, "n", SearchIn(query=q, limit=10))
                ms.append((time.perf_counter() - started) * 1000)
            return ms

        quiet = await search_all()
        questions.reverse()  # new queries again: nothing cached
        importing = True
        stored = 0

        async def importer() -> None:
            nonlocal stored
            at = 500
            while importing:
                batch = turns[at : at + args.batch] or turns[: args.batch]
                at = at + args.batch if at + args.batch < len(turns) else 0
                await api.store_many(p, "n", [MemoryIn(content=t) for t in batch])
                stored += len(batch)

        writer = asyncio.create_task(importer())
        await asyncio.sleep(1.0)  # the import is under way
        busy = await search_all()
        importing = False
        await writer

    print(f"{args.searches} searches, each query new, limit 10; batches of {args.batch} memories\n")
    print("| search latency, ms | p50 | p95 | max |\n|---|---|---|---|")
    for name, ms in (("no import running", quiet), (f"an import running ({stored:,} memories stored meanwhile)", busy)):
        print(f"| {name} | {pct(ms, 50):.1f} | {pct(ms, 95):.1f} | {max(ms):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
