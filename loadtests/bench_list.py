"""Listing memories newest first in a large namespace: the browse list's first page, a page deep
in it (by its cursor), and the same as one of the namespace's end users, through the facade.

Runs on a database bench_dashboard.py seeded and kept (``--data-dir``, 100,000 memories by
default there); run it once per source tree, alternating, for an A/B:

    HF_HUB_OFFLINE=1 PYTHONPATH=<tree>/services:loadtests .venv/bin/python loadtests/bench_list.py \
        --data-dir /tmp/dash100k --rounds 60
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from pathlib import Path

from dashboard_seed import Seeded
from harness import embedded_app, pct

QUIET = {"scheduler_interval_s": 0, "job_sweep_interval_s": 0, "webhook_sweep_interval_s": 0}


async def measure(folder: Path, rounds: int, limit: int, deep: int) -> dict[str, list[float]]:
    from memvault.memories.schemas import MemoryFilters
    from memvault.principal import Principal

    seeded = Seeded.load(folder / "seed.json")
    if seeded is None:
        raise SystemExit(f"{folder} holds no seed: run loadtests/bench_dashboard.py --data-dir {folder} first")
    times: dict[str, list[float]] = {"first page": [], f"page {deep + 1}": [], "first page, one user's": []}
    async with embedded_app(keep=folder, **QUIET) as stack:
        api = stack.api
        p = Principal.system(uuid.UUID(seeded.tenant_id), subject="bench")
        cursor = None
        for _ in range(deep):  # the cursor of a page deep in the list
            cursor = (await api.list_memories(p, seeded.namespace, limit=limit, cursor=cursor)).next_cursor
        user = MemoryFilters(user_id=seeded.user_id)
        calls = {
            "first page": lambda: api.list_memories(p, seeded.namespace, limit=limit),
            f"page {deep + 1}": lambda: api.list_memories(p, seeded.namespace, limit=limit, cursor=cursor),
            "first page, one user's": lambda: api.list_memories(p, seeded.namespace, user, limit=limit),
        }
        for i in range(rounds + 3):
            for label, call in calls.items():
                started = time.perf_counter()
                page = await call()
                if i >= 3:  # three warm-up rounds
                    times[label].append((time.perf_counter() - started) * 1000)
                assert page.data, label
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="a database bench_dashboard.py seeded and kept")
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--deep", type=int, default=20, help="pages walked for the deep page's cursor")
    args = parser.parse_args()
    times = asyncio.run(measure(args.data_dir.expanduser().resolve(), args.rounds, args.limit, args.deep))
    tree = os.environ.get("PYTHONPATH", "").split(":")[0]
    print(f"\nlist_memories(limit={args.limit}), {args.rounds} calls each, tree {tree}, load {os.getloadavg()[0]:.1f}")
    print("| call | p50 ms | p95 ms |\n|---|---:|---:|")
    for label, ms in times.items():
        print(f"| {label} | {pct(ms, 50):.1f} | {pct(ms, 95):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
