"""What the entity hop (``SearchIn.hops``) costs a search at 100,000 memories: A/B in one run, on
the namespace latency.py builds and keeps.

    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/quality/latency.py --keep DIR --queries 20 --warmup 5
    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/quality/hops_latency.py --keep DIR [--queries 300]
        [--b JSON] [--prefix "These days, "]

Every question is searched once untimed (its embedding is then cached: the comparison is of the
search, not the model), then twice timed, with and without the hop, in alternating order (A B,
B A, ...) so that drift in the machine's load falls on both alike. Reports server-side p50/p95
(``total``, ``sql``, ``hops``) of each and the ratio of B's to A's.

``--prefix`` puts a phrase before every question: with a time cue ("These days, ", "At first, ",
"As of May 2023, ") and ``--b '{"weights": {"time": 0}}'`` it measures what the timeline costs a
search (the line above the table says how many questions' cue was read)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # loadtests/: the shared harness
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import DEFAULT_DATA, embedded_app, pct
from locomo import revision
from protocol import kept


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--keep", type=Path, required=True, help="latency.py's --keep directory (already built)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--b", default='{"hops": true}', help="SearchIn fields of the B side (A: none)")
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--prefix", default="", help="a phrase put before every question (a time cue)")
    args = parser.parse_args()

    from memvault.principal import Principal
    from memvault.retrieval.schemas import SearchIn

    k = kept(args.keep, args.data, args.seed)
    built, ns, ref = k.built, k.namespace, k.reference
    questions = [args.prefix + q for q in k.questions[: args.queries]]
    cued: set[str] = set()
    sides: dict[str, dict[str, Any]] = {"A": {}, "B": json.loads(args.b)}

    async with embedded_app("memvault-latency-", keep=args.keep) as stack:
        api = stack.api
        p = Principal.system(uuid.UUID(built["tenant_id"]), subject="bench")

        async def search(text: str, fields: dict[str, Any]) -> dict[str, float]:
            out = await api.search(p, ns, SearchIn(query=text, reference_time=ref, **{"limit": 10, **fields}))
            if out.metrics.cues and any(out.metrics.cues.get(c) for c in ("order", "window", "day")):
                cued.add(text)
            return out.metrics.timings_ms

        for text in questions:  # warm: embeddings cached, statements built, pages read
            await search(text, {})
            await search(text, sides["B"])
        timings: dict[str, dict[str, list[float]]] = {side: {} for side in sides}
        started = time.perf_counter()
        for i, text in enumerate(questions):
            order = ("A", "B") if i % 2 == 0 else ("B", "A")
            for side in order:
                for key, ms in (await search(text, sides[side])).items():
                    timings[side].setdefault(key, []).append(ms)
        seconds = time.perf_counter() - started

    lines = [
        f"{len(questions)} questions, {built['memories']:,} memories, A: defaults, B: {args.b}; "
        f"commit {revision()['commit']}; timed part {seconds:.0f} s"
        + (f"; prefix {args.prefix!r}, a time cue read in {len(cued)}" if args.prefix else ""),
        "",
        "| server-side ms | A p50 | B p50 | B/A p50 | A p95 | B p95 | B/A p95 |",
        "|---|---|---|---|---|---|---|",
    ]
    for key in ("total", "sql", "hops"):
        a, b = timings["A"].get(key), timings["B"].get(key)
        if a and b:
            a50, b50, a95, b95 = pct(a, 50), pct(b, 50), pct(a, 95), pct(b, 95)
            lines.append(
                f"| {key} | {a50:.1f} | {b50:.1f} | {b50 / a50:.3f} | {a95:.1f} | {b95:.1f} | {b95 / a95:.3f} |"
            )
        elif b:
            lines.append(f"| {key} | - | {pct(b, 50):.1f} | | - | {pct(b, 95):.1f} | |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
