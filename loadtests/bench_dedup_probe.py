"""The dedup job's near-duplicate probe, exact against through the HNSW index, by namespace size:
which is cheaper where, and do they find the same pairs. The job picks the index from
`maintenance.service.NEAR_INDEX_FROM` live memories on; this measures where that line should be.

    HF_HUB_OFFLINE=1 PYTHONPATH=services .venv/bin/python loadtests/bench_dedup_probe.py \
        [--sizes 1000,2500,5000] [--rounds 3]

LoCoMo turns (read in place, never copied), embedded by the bundled model, inserted directly into
one namespace per size (the first N turns; the larger namespaces' rows are in the same index, as a
shared database's are), then `maintenance.repository.near_pairs` swept over each namespace as the
job sweeps it, exact and indexed alternating. Prints a markdown table: ms per memory probed, the
pairs each found, and the indexed sweep's share of the exact sweep's pairs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from pathlib import Path

from harness import DEFAULT_DATA, embedded_app, insert_memories, sessions


async def sweep(api: object, tenant_id: uuid.UUID, ns_id: uuid.UUID, model: str, threshold: float, index: bool):
    from memvault.maintenance import repository as repo
    from memvault.maintenance.service import NEAR_BATCH

    pairs: set[tuple[uuid.UUID, uuid.UUID]] = set()
    after = None
    t0 = time.perf_counter()
    while True:
        async with api._db.tenant_tx(tenant_id) as tx:  # type: ignore[attr-defined]
            found, after = await repo.near_pairs(
                tx.session,
                tenant_id,
                ns_id,
                model_id=model,
                threshold=threshold,
                after=after,
                batch=NEAR_BATCH,
                use_index=index,
            )
        pairs.update((min(a, b), max(a, b)) for a, b, _ in found)
        if after is None:
            return time.perf_counter() - t0, pairs


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--sizes", default="1000,2500,5000")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    from sqlalchemy import text

    from memvault.namespaces.schemas import NamespaceIn
    from memvault.principal import Principal

    data = json.loads(args.data.read_text())
    texts = [f"{t['speaker']}: {t['text']}" for conv in data for _, _, turns in sessions(conv) for t in turns]
    texts = list(dict.fromkeys(texts))[: max(sizes)]
    if len(texts) < max(sizes):
        raise SystemExit(f"LoCoMo has {len(texts)} distinct turns; ask for sizes up to that")

    async with embedded_app("memvault-bench-dedup-") as stack:
        api, embedder = stack.api, stack.embedder
        t0 = time.perf_counter()
        vectors: list[list[float]] = []
        for i in range(0, len(texts), 64):
            vectors += await embedder.embed(texts[i : i + 64])
        embed_s = time.perf_counter() - t0
        tenant = await api.create_tenant(f"bench-{uuid.uuid4().hex[:8]}")
        p = Principal.system(tenant.id, subject="bench")
        spaces: dict[int, uuid.UUID] = {}
        for n in sizes:
            await api.create_namespace(p, NamespaceIn(name=f"n{n}"))
            async with api._db.tenant_tx(tenant.id) as tx:
                spaces[n] = (await api._namespace(tx, p, f"n{n}")).id
            await insert_memories(
                api, tenant.id, spaces[n], list(zip(texts[:n], vectors[:n], strict=True)), embedder.model_id
            )
        async with api._db.owner() as s:
            await s.execute(text("ANALYZE memories"))

        threshold = stack.settings.dedup_threshold
        print(f"embedded {len(texts)} turns in {embed_s:.0f} s; threshold {threshold}\n")
        print(
            "| namespace | exact ms / memory | index ms / memory | index / exact | pairs exact | pairs index | found |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for n in sizes:
            times: dict[bool, list[float]] = {False: [], True: []}
            found: dict[bool, set[tuple[uuid.UUID, uuid.UUID]]] = {}
            for r in range(args.rounds):
                for index in (False, True) if r % 2 == 0 else (True, False):
                    seconds, pairs = await sweep(api, tenant.id, spaces[n], embedder.model_id, threshold, index)
                    times[index].append(seconds)
                    found[index] = pairs
            exact, indexed = statistics.median(times[False]), statistics.median(times[True])
            share = len(found[True] & found[False]) / max(len(found[False]), 1)
            print(
                f"| {n:,} | {1000 * exact / n:.2f} | {1000 * indexed / n:.2f} | {indexed / exact:.2f} "
                f"| {len(found[False])} | {len(found[True])} | {share:.3f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
