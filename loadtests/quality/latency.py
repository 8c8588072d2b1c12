"""Search latency on one 100,000-memory namespace: a LoCoMo conversation ingested through the facade
plus generated filler, on the embedded PostgreSQL and the local MiniLM; one client, warm.

    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/quality/latency.py [--memories 100000]
        [--conversation conv-42] [--queries 600] [--weights JSON] [--extra JSON] [--settings JSON] [--out PATH]
        [--keep DIR] [--users N]

Embedding 100,000 texts with MiniLM runs at 90-170 texts/s here (10-20 minutes), so the filler is
made from real text without embedding each row:

- the turns of the other nine LoCoMo conversations (~5,300, as ``Speaker: text``) are embedded
  once: a pool of real chat lines with their real vectors;
- a filler row is two pool turns, ``A: text_i B: text_j`` (about 29 million distinct pairs),
  with the vector normalise(w_i·v_i + w_j·v_j) plus a small Gaussian noise so a repeated pair
  does not repeat a vector, w = sqrt(words). MiniLM mean-pools its tokens, so a weighted mean
  of the two embeddings approximates the embedding of the joined text; how closely is measured:
  a sample of filler rows is embedded for real and compared (``fidelity`` in the output);
- rows go in with COPY through the owner connection, with the HNSW and full-text indexes
  dropped and then re-created from their own definitions (the migration's: hnsw m=16,
  ef_construction=64; gin on tsv), then VACUUM ANALYZE (the word index, memory_terms, is filled
  by its trigger during the COPY); the conversation is then stored through
  the facade, so its rows enter the built graph as production writes do.

With ``--users N`` the namespace is one that N users share: each filler row is one user's own
(user scope, round robin), the conversation is one more user's, and every search reads as that
user (``filters.user_id``), as an application serving many users of one namespace does.

Then a warm-up, and the timed searches, one at a time: the conversation's own questions first,
then other conversations' questions (all go to this namespace), once with the query embedding
uncached and once cached. Reports facade time and the server's own timings (metrics.timings_ms),
p50/p95/p99, recall@10 of the conversation's questions among the 100,000, and the build time.
Writes JSON and markdown (default loadtests/quality/results/latency-<date>.json/.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # loadtests/: the shared harness

from harness import DEFAULT_DATA, embedded_app, sessions
from locomo import RESULTS, ingest, latency, revision, server_settings, with_rest
from protocol import memories_of, questions_of, recall_at, reference_time

# Indexes that a bulk load rebuilds rather than maintains row by row.
BULK_INDEXES = ("ix_memories_embedding", "ix_memories_tsv")
FILLER_TYPES = (("event", 0.6), ("fact", 0.25), ("preference", 0.1), ("note", 0.05))


def owner_of(conv: dict[str, Any]) -> str:
    """The user a conversation belongs to when the namespace is shared by users (``--users``)."""
    return f"{conv['sample_id']}-owner"


def pool_of(data: list[dict[str, Any]], skip: str) -> list[str]:
    """``Speaker: text`` of every turn of the other conversations."""
    return [
        f"{t['speaker']}: {t['text']}"
        for conv in data
        if conv["sample_id"] != skip
        for _, _, turns in sessions(conv)
        for t in turns
        if t["text"].strip()
    ]


def make_filler(pool: list[str], vectors: Any, n: int, rng: random.Random, noise: float) -> tuple[list[str], Any]:
    """n filler texts of two pool turns each, and their synthetic unit vectors: the two turns'
    embeddings weighted by the square root of their length, plus noise (see the module docstring;
    on a sample this came closer to the real embedding than plain or length-weighted means)."""
    import numpy as np

    gen = np.random.default_rng(rng.randrange(2**32))
    i = gen.integers(0, len(pool), n)
    j = gen.integers(0, len(pool), n)
    weight = np.sqrt(np.array([len(text.split()) for text in pool], dtype=np.float32))
    v = weight[i][:, None] * vectors[i] + weight[j][:, None] * vectors[j]
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    v += gen.normal(0.0, noise, v.shape).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return [f"{pool[a]} {pool[b]}" for a, b in zip(i.tolist(), j.tolist(), strict=True)], v


def bulk_insert(
    conninfo: str,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    texts: list[str],
    vectors: Any,
    model_id: str,
    span: tuple[datetime, datetime],
    rng: random.Random,
    users: int = 0,
) -> dict[str, float]:
    """COPY the filler in with the bulk indexes dropped, re-create them as defined, VACUUM ANALYZE;
    with ``users``, row k is user ``filler-user-{k % users}``'s own (user scope). Returns the
    seconds of each step."""
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    from memvault.memories.service import content_hash

    kinds, shares = zip(*FILLER_TYPES, strict=True)
    start, end = span
    seconds: dict[str, float] = {}
    with psycopg.connect(conninfo, autocommit=True) as conn:
        register_vector(conn)
        defs = dict(
            conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'memories' AND indexname = ANY(%s)",
                [list(BULK_INDEXES)],
            ).fetchall()
        )
        assert set(defs) == set(BULK_INDEXES), defs
        for name in defs:
            conn.execute(f"DROP INDEX {name}")
        t0 = time.perf_counter()
        columns = (
            "tenant_id, id, namespace_id, type, content, scope, user_id, session_id, metadata, valid_from, "
            "embedding, embedding_model, content_hash, created_by"
        )
        types = ["uuid", "uuid", "uuid", "text", "text", "text", "text", "text", "jsonb", "timestamptz"]
        types += ["vector", "text", "text", "text"]
        with conn.cursor() as cur, cur.copy(f"COPY memories ({columns}) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(types)
            for k, (text, vec) in enumerate(zip(texts, vectors, strict=True)):
                at = start + (end - start) * rng.random()
                copy.write_row(
                    (
                        tenant_id,
                        uuid.uuid4(),
                        namespace_id,
                        rng.choices(kinds, shares)[0],
                        text,
                        "user" if users else "namespace",
                        f"filler-user-{k % users}" if users else None,
                        f"filler-{k // 20}",
                        Jsonb({"filler": True}),
                        at,
                        vec,
                        model_id,
                        content_hash(text),
                        "bench-filler",
                    )
                )
        seconds["copy"] = time.perf_counter() - t0
        # Room to build the graph in memory (the default 64 MB would spill to a slower build).
        conn.execute("SET maintenance_work_mem = '1GB'")
        for name, ddl in defs.items():
            t0 = time.perf_counter()
            conn.execute(ddl)
            seconds[f"index {name}"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        conn.execute("VACUUM ANALYZE memories")
        # The word index (migration 0013), filled by its trigger during the COPY: vacuumed so that
        # its pages are all-visible and a word's range is read from the index alone, as
        # autovacuum leaves it on a server that has been running.
        conn.execute("VACUUM ANALYZE memory_terms")
        seconds["vacuum analyze"] = time.perf_counter() - t0
    return seconds


async def build_namespace(
    api: Any,
    embedder: Any,
    p: Any,
    urls: Any,
    data: list[dict[str, Any]],
    conv: dict[str, Any],
    n_filler: int,
    rng: random.Random,
    args: argparse.Namespace,
) -> tuple[dict[str, float], dict[str, float]]:
    """The namespace of the conversation plus ``n_filler`` filler rows (module docstring). Returns
    the seconds of each build step and the filler's fidelity."""
    import numpy as np

    from memvault.namespaces.schemas import NamespaceIn

    ns = conv["sample_id"]
    build: dict[str, float] = {}
    namespace = await api.create_namespace(p, NamespaceIn(name=ns))

    t0 = time.perf_counter()
    pool = pool_of(data, skip=ns)
    pool_vectors = np.asarray(await embedder.embed(pool), dtype=np.float32)
    build[f"embed the pool ({len(pool):,} turns of the other conversations)"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    texts, vectors = make_filler(pool, pool_vectors, n_filler, rng, args.noise)
    build[f"make {n_filler:,} filler rows"] = time.perf_counter() - t0
    sample = rng.sample(range(n_filler), min(args.fidelity, n_filler))
    real = np.asarray(await embedder.embed([texts[k] for k in sample]), dtype=np.float32)
    cos = cosine_rows(vectors[sample], real)
    fidelity = {
        "sample": len(sample),
        "mean": float(cos.mean()),
        "p5": float(np.percentile(cos, 5)),
        "min": float(cos.min()),
    }

    conninfo = urls.owner.set(drivername="postgresql").render_as_string(hide_password=False)
    span = (min(m["valid_from"] for m in memories_of(conv)) - timedelta(days=365), reference_time(conv))
    steps = await asyncio.to_thread(
        bulk_insert, conninfo, p.tenant_id, namespace.id, texts, vectors, embedder.model_id, span, rng, args.users
    )
    build.update({f"{k} (filler)" if k == "copy" else k: v for k, v in steps.items()})
    del texts, vectors

    t0 = time.perf_counter()
    await ingest(api, p, ns, conv, user_id=owner_of(conv) if args.users else None)
    build[f"store {len(memories_of(conv))} conversation turns through the facade"] = time.perf_counter() - t0
    build["total"] = sum(build.values())
    return build, fidelity


def relation_sizes(conninfo: str) -> dict[str, str]:
    import psycopg

    with psycopg.connect(conninfo) as conn:
        table, hnsw, gin, terms = conn.execute(
            "SELECT pg_size_pretty(pg_total_relation_size('memories')), "
            "pg_size_pretty(pg_relation_size('ix_memories_embedding')), "
            "pg_size_pretty(pg_relation_size('ix_memories_tsv')), "
            "pg_size_pretty(pg_total_relation_size('memory_terms'))"
        ).fetchone()
    return {"table": table, "hnsw": hnsw, "gin": gin, "terms": terms}


def cosine_rows(a: Any, b: Any) -> Any:
    import numpy as np

    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def markdown(r: dict[str, Any]) -> str:
    b, f = r["build_s"], r["fidelity"]
    lines = [
        f"Search latency, one namespace of {r['memories']:,} memories ({r['conversation']}: "
        f"{r['conversation_memories']} via the facade + {r['filler']:,} filler), {r['date']}, "
        f"commit {r['revision']['commit']}"
        + (
            f" + uncommitted changes in services/ (diff {r['revision']['services_diff_sha256']})"
            if r["revision"]["uncommitted"]
            else ""
        ),
        "",
        f"{r['timed']} timed searches ({min(r['own_questions'], r['timed'])} of them the conversation's own "
        "questions, the rest other conversations' questions), limit 10, "
        f"one client, after {r['warmup']} warm-up searches."
        + (f" Request: {json.dumps(r['request'])}." if r["request"] else "")
        + (f" Server settings: {json.dumps(r['settings_overrides'])}." if r["settings_overrides"] else ""),
        "",
        "| search latency, ms | p50 | p95 | p99 | mean |",
        "|---|---|---|---|---|",
    ]
    for label, key in (("query embedding uncached", "uncached"), ("query embedding cached", "cached")):
        for name, lat in r["latency_ms"][key].items():
            row = f"{label}: facade" if name == "facade" else f"  {name}"
            lines.append(f"| {row} | {lat['p50']:.1f} | {lat['p95']:.1f} | {lat['p99']:.1f} | {lat['mean']:.1f} |")
    lines += [
        "",
        f"recall@10 of the conversation's questions ({r['recall_questions']} scored) among the {r['memories']:,}: "
        f"{r['recall@10']:.3f}",
        "",
        "| build" + (" (reused from an earlier run)" if r.get("build_reused") else "") + " | seconds |",
        "|---|---|",
    ]
    lines += [f"| {step} | {s:.1f} |" for step, s in b.items()]
    lines += [
        "",
        f"Filler vectors against real embeddings of the same text ({f['sample']} rows): cosine mean "
        f"{f['mean']:.3f}, p5 {f['p5']:.3f}, min {f['min']:.3f}. Table {r['sizes']['table']}, "
        f"HNSW {r['sizes']['hnsw']}, GIN {r['sizes']['gin']}, word index (memory_terms, with its key) "
        f"{r['sizes']['terms']}.",
        "",
        f"load average before / after: {r['load_before']} / {r['load_after']}; run took {r['seconds']:.0f} s",
    ]
    return "\n".join(lines) + "\n"


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversation", default="conv-42", help="sample_id ingested through the facade")
    parser.add_argument("--memories", type=int, default=100_000, help="namespace size, filler included")
    parser.add_argument("--queries", type=int, default=600, help="timed searches per pass")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--noise", type=float, default=0.005, help="per-dimension sigma on filler vectors")
    parser.add_argument("--fidelity", type=int, default=256, help="filler rows embedded for real to compare")
    parser.add_argument("--weights", default=None, help="SearchIn.weights as JSON")
    parser.add_argument("--extra", default=None, help="other SearchIn fields as JSON")
    parser.add_argument("--settings", default=None, help="server Settings overrides as JSON")
    parser.add_argument(
        "--users",
        type=int,
        default=0,
        help="spread the filler over this many users (user scope), store the conversation as one more user's, "
        "and search as that user (filters.user_id); 0 keeps every row the namespace's",
    )
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="build the database in this directory and keep it; a later run with the same build arguments "
        "reuses it instead of building again (the earlier runs' searches have counted accesses there)",
    )
    args = parser.parse_args()

    from memvault.principal import Principal
    from memvault.retrieval.schemas import SearchIn

    started = time.perf_counter()
    load_before = os.getloadavg()
    rng = random.Random(args.seed)
    data = json.loads(args.data.read_text())
    conv = next(c for c in data if c["sample_id"] == args.conversation)
    ns = conv["sample_id"]
    n_own = len(memories_of(conv))
    n_filler = args.memories - n_own
    ref = reference_time(conv)
    own = questions_of(conv)
    others = [q for c in data if c is not conv for q in questions_of(c)]
    rng.shuffle(others)
    timed = (own + others)[: args.queries]
    warm = others[max(0, args.queries - len(own)) :][: args.warmup]

    request: dict[str, Any] = {"filters": {"user_id": owner_of(conv)}} if args.users else {}
    request.update(json.loads(args.extra) if args.extra else {})
    if args.weights:
        request["weights"] = {**request.get("weights", {}), **json.loads(args.weights)}
    overrides = json.loads(args.settings) if args.settings else {}

    built = {"conversation": ns, "memories": args.memories, "seed": args.seed, "noise": args.noise}
    if args.users:
        built["users"] = args.users
    state = args.keep / "built.json" if args.keep else None
    reused = None
    if state is not None and state.exists():
        reused = json.loads(state.read_text())
        if {k: reused.get(k) for k in built} != built:
            parser.error(f"{args.keep} holds another build ({state.read_text()}); remove it or pick another --keep")

    async with embedded_app("memvault-latency-", keep=args.keep, **overrides) as stack:
        api, embedder = stack.api, stack.embedder
        if reused is not None:
            p = Principal.system(uuid.UUID(reused["tenant_id"]), subject="bench")
            build, fidelity = reused["build_s"], reused["fidelity"]
        else:
            tenant = await api.create_tenant(f"latency-{uuid.uuid4().hex[:8]}")
            p = Principal.system(tenant.id, subject="bench")
            build, fidelity = await build_namespace(api, embedder, p, stack.urls, data, conv, n_filler, rng, args)
            if state is not None:
                saved = {**built, "tenant_id": str(tenant.id), "build_s": build, "fidelity": fidelity}
                state.write_text(json.dumps(saved))
        count = (await api.get_namespace(p, ns)).memory_count
        conninfo = stack.urls.owner.set(drivername="postgresql").render_as_string(hide_password=False)

        async def search(text: str) -> tuple[float, dict[str, float], list[str | None]]:
            t = time.perf_counter()
            out = await api.search(p, ns, SearchIn(**{"query": text, "limit": 10, "reference_time": ref, **request}))
            ms = (time.perf_counter() - t) * 1000
            return ms, with_rest(out.metrics.timings_ms), [r.memory.metadata.get("dia_id") for r in out.results]

        for q in warm:
            await search(q.text)
        passes: dict[str, dict[str, dict[str, float]]] = {}
        recalls: list[float] = []
        for name in ("uncached", "cached"):
            facade: list[float] = []
            server: dict[str, list[float]] = {}
            for k, q in enumerate(timed):
                ms, timings, retrieved = await search(q.text)
                facade.append(ms)
                for key, v in timings.items():
                    server.setdefault(key, []).append(v)
                if name == "uncached" and k < len(own) and q.evidence:
                    recalls.append(recall_at(q.evidence, retrieved, 10))
            passes[name] = {"facade": latency(facade), **{f"server.{k}": latency(v) for k, v in server.items()}}

        sizes = await asyncio.to_thread(relation_sizes, conninfo)

    report = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "revision": revision(),
        "command": " ".join(sys.argv),
        "settings_overrides": overrides,
        "settings": server_settings(stack.settings),
        "request": request,
        "conversation": ns,
        "memories": count,
        "conversation_memories": n_own,
        "filler": n_filler,
        "timed": len(timed),
        "own_questions": len(own),
        "warmup": len(warm),
        "latency_ms": passes,
        "recall@10": sum(recalls) / len(recalls) if recalls else 0.0,
        "recall_questions": len(recalls),
        "build_s": build,
        "build_reused": reused is not None,
        "fidelity": fidelity,
        "sizes": sizes,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "seconds": time.perf_counter() - started,
    }
    out = args.out or RESULTS / f"latency-{datetime.now(UTC):%Y-%m-%d-%H%M}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=str))
    md = markdown(report)
    out.with_suffix(".md").write_text(md)
    print(md)
    print(f"written: {out} and {out.with_suffix('.md').name}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
