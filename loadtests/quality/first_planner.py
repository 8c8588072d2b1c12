"""Whether the tenant that first runs a statement on a connection decides how fast every other
tenant's runs of it are there (db/planned.py): one pooled connection, a small tenant's searches
first, then the large tenant's, on the namespace latency.py builds and keeps.

    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/quality/latency.py --keep DIR --queries 20 --warmup 5
    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/quality/first_planner.py --keep DIR \\
        [--small 8] [--queries 12] [--extra '{"neighbours": 2, "hops": true}']

The small tenant (a new one each run, six memories in one session) searches ``--small`` of the
questions; then the large tenant searches ``--queries`` of them, each timed. Prints each of the
large tenant's searches: server-side ``sql``, ``neighbours`` and ``total`` ms. ``--small 0`` is
the same without the small tenant first."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # loadtests/: the shared harness
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import DEFAULT_DATA, embedded_app
from locomo import revision
from protocol import kept


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--keep", type=Path, required=True, help="latency.py's --keep directory (already built)")
    parser.add_argument("--small", type=int, default=8, help="the small tenant's searches first")
    parser.add_argument("--queries", type=int, default=12, help="the large tenant's searches, timed")
    parser.add_argument("--extra", default='{"neighbours": 2, "hops": true}', help="SearchIn fields as JSON")
    parser.add_argument("--seed", type=int, default=4)
    args = parser.parse_args()

    from memvault.memories.schemas import MemoryIn
    from memvault.namespaces.schemas import NamespaceIn
    from memvault.principal import Principal
    from memvault.retrieval.schemas import SearchIn

    k = kept(args.keep, args.data, args.seed)
    built, ns, ref, questions = k.built, k.namespace, k.reference, k.questions
    extra = json.loads(args.extra)
    rows = []
    # One connection: what one tenant's first run plans, the next tenant's runs use.
    async with embedded_app("memvault-latency-", keep=args.keep, db_pool_size=1) as stack:
        api = stack.api
        large = Principal.system(uuid.UUID(built["tenant_id"]), subject="bench")
        tenant = await api.create_tenant(f"small-{uuid.uuid4().hex[:8]}")
        small = Principal.system(tenant.id, subject="bench")
        await api.create_namespace(small, NamespaceIn(name=ns))
        for i in range(6):
            await api.store(small, ns, MemoryIn(content=f"Notes from the cooking class, part {i}", session_id="s1"))
        for text in questions[: args.small]:
            await api.search(small, ns, SearchIn(query=text, reference_time=ref, limit=10, **extra))
        for text in questions[args.small : args.small + args.queries]:
            out = await api.search(large, ns, SearchIn(query=text, reference_time=ref, limit=10, **extra))
            rows.append(out.metrics.timings_ms)

    print(
        f"{built['memories']:,} memories; the small tenant's {args.small} searches first, then the large "
        f"tenant's {args.queries}; {args.extra}; commit {revision()['commit']}"
    )
    print()
    print("| search | sql ms | neighbours ms | total ms |")
    print("|---|---|---|---|")
    for i, timings in enumerate(rows, 1):
        print(f"| {i} | {timings.get('sql', 0):.0f} | {timings.get('neighbours', 0):.0f} | {timings['total']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
