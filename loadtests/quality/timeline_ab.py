"""What a change to the timeline (retrieval/timeline.py, hybrid.py) costs a search at 100,000
memories: A/B in one process, on the namespace latency.py builds and keeps.

    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/quality/latency.py --keep DIR --queries 20 --warmup 5
    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/quality/timeline_ab.py --keep DIR --a-services <checkout>/services
        [--queries 300]

A is the timeline and hybrid search of another checkout (``--a-services``, e.g. main's), loaded
beside this one's, B this checkout's; everything else (SQL, cues, the model) is this checkout's,
so the two must differ only in those two files. The questions are LoCoMo's that carry a time cue
(``--kinds``: order, before/after, one day, any other period): a search without one takes the same
path on both. Every question is
searched once untimed per side (its embedding is then cached: the comparison is of the search,
not the model), then timed on both sides in alternating order (A B, B A, ...) so that drift in the
machine's load falls on both alike. Reports server-side p50/p95/mean (``total``, ``sql``) of each
side and the ratio B/A, and the process's CPU time per side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
import types
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # loadtests/: the shared harness
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import DEFAULT_DATA, embedded_app, pct
from locomo import revision
from protocol import questions_of, reference_time


def _module(name: str, path: Path, replace: tuple[str, str] | None = None) -> types.ModuleType:
    """``path`` loaded as module ``name`` (registered first: its dataclasses look themselves up)."""
    source = path.read_text()
    if replace is not None:
        assert replace[0] in source, f"{path} does not say {replace[0]!r}"
        source = source.replace(*replace)
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    sys.modules[name] = mod
    exec(compile(source, str(path), "exec"), mod.__dict__)
    return mod


def side_a(services: Path) -> Any:
    """The A side's ``hybrid_search``: its hybrid.py calling its own timeline.py."""
    retrieval = services / "memvault" / "retrieval"
    _module("ab_timeline_a", retrieval / "timeline.py")
    hybrid = _module(
        "ab_hybrid_a",
        retrieval / "hybrid.py",
        ("from memvault.retrieval import timeline\n", "import ab_timeline_a as timeline\n"),
    )
    return hybrid.hybrid_search


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--keep", type=Path, required=True, help="latency.py's --keep directory (already built)")
    parser.add_argument("--a-services", type=Path, required=True, help="the A side's services/ directory")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument(
        "--kinds",
        default="order,relative,day,period",
        help="which cues to ask: order (newest/oldest), relative (before/after an event), day (one day "
        "named as a date), period (any other window)",
    )
    args = parser.parse_args()

    from memvault.principal import Principal
    from memvault.retrieval import service
    from memvault.retrieval.cues import analyse
    from memvault.retrieval.schemas import SearchIn

    hybrid = {"A": side_a(args.a_services), "B": service.hybrid_search}
    built = json.loads((args.keep / "built.json").read_text())
    data = json.loads(args.data.read_text())
    conv = next(c for c in data if c["sample_id"] == built["conversation"])
    ns, ref = conv["sample_id"], reference_time(conv)
    kinds = set(args.kinds.split(","))

    def kind(text: str) -> str | None:
        cues = analyse(text, ref)
        if not cues.timeline:
            return None
        if cues.window is not None:
            return "day" if cues.day else "period"
        return "order" if cues.order is not None else "relative"

    questions = [q.text for c in data for q in questions_of(c) if kind(q.text) in kinds]
    random.Random(args.seed).shuffle(questions)
    questions = questions[: args.queries]

    async with embedded_app("memvault-latency-", keep=args.keep) as stack:
        api = stack.api
        p = Principal.system(uuid.UUID(built["tenant_id"]), subject="bench")

        async def search(text: str, side: str) -> dict[str, float]:
            service.hybrid_search = hybrid[side]  # type: ignore[attr-defined]
            out = await api.search(p, ns, SearchIn(query=text, limit=10, reference_time=ref))
            return out.metrics.timings_ms

        for text in questions:  # warm: embeddings cached, statements built, pages read
            for side in hybrid:
                await search(text, side)
        timings: dict[str, dict[str, list[float]]] = {side: {} for side in hybrid}
        cpu = {side: 0.0 for side in hybrid}
        started = time.perf_counter()
        for i, text in enumerate(questions):
            for side in ("A", "B") if i % 2 == 0 else ("B", "A"):
                t = time.process_time()
                for key, ms in (await search(text, side)).items():
                    timings[side].setdefault(key, []).append(ms)
                cpu[side] += time.process_time() - t
        seconds = time.perf_counter() - started
        service.hybrid_search = hybrid["B"]  # type: ignore[attr-defined]

    import os

    lines = [
        f"{len(questions)} LoCoMo questions with a time cue ({args.kinds}), {built['memories']:,} memories; "
        f"A: {args.a_services}, "
        f"B: commit {revision()['commit']}; timed part {seconds:.0f} s; load average {os.getloadavg()}",
        "",
        "| server-side ms | A p50 | B p50 | B/A p50 | A p95 | B p95 | B/A p95 | A mean | B mean | B/A mean |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key in ("total", "sql"):
        a, b = timings["A"].get(key), timings["B"].get(key)
        if a and b:
            a50, b50, a95, b95, am, bm = (
                pct(a, 50),
                pct(b, 50),
                pct(a, 95),
                pct(b, 95),
                sum(a) / len(a),
                sum(b) / len(b),
            )
            lines.append(
                f"| {key} | {a50:.1f} | {b50:.1f} | {b50 / a50:.3f} | {a95:.1f} | {b95:.1f} | {b95 / a95:.3f} "
                f"| {am:.1f} | {bm:.1f} | {bm / am:.3f} |"
            )
    lines += ["", f"process CPU time, s: A {cpu['A']:.2f}, B {cpu['B']:.2f}, B/A {cpu['B'] / cpu['A']:.3f}"]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
