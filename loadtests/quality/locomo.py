"""Retrieval quality on LoCoMo, the protocol of issue 4, through the facade on the embedded
PostgreSQL and the local MiniLM (all-MiniLM-L6-v2).

    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/quality/locomo.py [--conversations 10] [--questions 0]
        [--weights JSON] [--extra JSON] [--baselines] [--out PATH]

Each conversation goes into a namespace of its own: every turn a memory (``Speaker: text`` plus the
photo caption if any; type event; session_id; valid_from = the session's date; metadata dia_id,
speaker, session_date) linked to an entity per speaker. Every question of categories 1-4 is
searched with ``reference_time`` = the conversation's last session. Scores: recall@5 and
recall@10 (share of the evidence turns retrieved), all evidence in the top 10, any evidence in
the top 10, MRR@10; overall and per category. Also ingest throughput and search latency.

``--weights`` goes to SearchIn.weights, ``--extra`` is merged into every SearchIn (any field, e.g.
'{"neighbours": 1}'; '{"reference_time": null}' turns the story's time off). ``--baselines`` adds,
on the same data in the same run, lexical alone, dense alone and their plain RRF with every other
channel at 0. Writes JSON and markdown (default loadtests/quality/results/locomo-<date>.json/.md,
not committed: the figures belong in docs/benchmarks.md) and prints the markdown.

LoCoMo is read in place from ../shared/datasets (CC BY-NC 4.0: never copied into the repo).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # loadtests/: the shared harness

from harness import DEFAULT_DATA, ROOT, embedded_app, pct
from protocol import CATEGORIES, Question, memories_of, questions_of, reference_time, score, speakers_of, summarise

RESULTS = Path(__file__).resolve().parent / "results"


def channels_only(keep: tuple[str, ...]) -> dict[str, float]:
    """Weights with every known channel at 0 except ``keep`` at 1."""
    from memvault.retrieval.schemas import CHANNELS

    return {c: (1.0 if c in keep else 0.0) for c in CHANNELS}


def baselines() -> list[tuple[str, dict[str, Any], str | None]]:
    """(name, request fields, channel whose hits alone count). With its partner at weight 0 a
    channel's list is padded with the other's candidates at score 0 in id order: those are dropped."""
    from memvault.retrieval.schemas import SearchIn

    # Reciprocal rank fusion whatever the server's, namespace's or --extra's fusion default: a
    # channel's own order, and candidates it did not rank score 0.
    rrf = {"fusion": "rrf"} if "fusion" in SearchIn.model_fields else {}
    return [
        ("lexical alone", {"weights": channels_only(("lexical",)), **rrf}, "lexical"),
        ("dense alone", {"weights": channels_only(("dense",)), **rrf}, "dense"),
        ("dense + lexical RRF, other channels 0", {"weights": channels_only(("dense", "lexical")), **rrf}, None),
    ]


def revision() -> dict[str, Any]:
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()

    # The ranking code may be mid-change in the work tree: name the exact state measured.
    diff = git("diff", "HEAD", "--", "services")
    return {
        "commit": git("rev-parse", "--short", "HEAD"),
        "uncommitted": git("status", "--porcelain", "services"),
        "services_diff_sha256": hashlib.sha256(diff.encode()).hexdigest()[:12] if diff else None,
    }


def server_settings(settings: Any) -> dict[str, Any]:
    """The server's settings as run (secrets masked, the temp database left out)."""
    return {k: v for k, v in settings.model_dump(mode="json").items() if k != "database_url"}


def with_rest(timings: dict[str, float]) -> dict[str, float]:
    """The server's timings plus ``rest``: its total less the parts it names (namespace lookup,
    access bookkeeping, building the response)."""
    if "total" not in timings:
        return dict(timings)
    return {**timings, "rest": timings["total"] - sum(v for k, v in timings.items() if k != "total")}


def latency(xs: list[float]) -> dict[str, float]:
    return {"p50": pct(xs, 50), "p95": pct(xs, 95), "p99": pct(xs, 99), "mean": statistics.fmean(xs)}


async def ingest(
    api: Any,
    p: Any,
    ns: str,
    conv: dict[str, Any],
    batch: int = 500,
    *,
    user_id: str | None = None,
    text_only: bool = False,
) -> int:
    """One conversation into namespace ``ns`` through the facade: an entity per speaker, then
    every turn linked to its speaker, in batches (embedding included). With ``user_id`` the turns
    are that user's own (user scope) instead of the namespace's. ``text_only`` stores each turn as
    a client that sends no session id would (issue 30's second row)."""
    from memvault.entities.schemas import EntityIn
    from memvault.memories.schemas import MemoryIn

    entity = {}
    for name in speakers_of(conv):
        e, _ = await api.upsert_entity(p, ns, EntityIn(name=name, type="person"))
        entity[name] = e.id
    owned = {"scope": "user", "user_id": user_id} if user_id else {}
    dropped = {"session_id": None} if text_only else {}
    rows = [
        MemoryIn(**{**m, **owned, **dropped}, entity_ids=[entity[m["metadata"]["speaker"]]]) for m in memories_of(conv)
    ]
    for i in range(0, len(rows), batch):
        await api.store_many(p, ns, rows[i : i + batch])
    return len(rows)


async def ask(
    api: Any,
    p: Any,
    questions: list[Question],
    refs: dict[str, datetime],
    request: dict[str, Any],
    only: str | None = None,
) -> dict[str, Any]:
    """Search every question; score, time, and keep what was retrieved."""
    from memvault.retrieval.schemas import SearchIn

    facade: list[float] = []
    server: dict[str, list[float]] = {}
    records, scored, trimmed = [], [], 0
    for q in questions:
        body = {"query": q.text, "limit": 10, "reference_time": refs[q.namespace], **request}
        t0 = time.perf_counter()
        out = await api.search(p, q.namespace, SearchIn(**body))
        facade.append((time.perf_counter() - t0) * 1000)
        for key, ms in with_rest(out.metrics.timings_ms).items():
            server.setdefault(key, []).append(ms)
        results = out.results
        if only is not None:
            results = [r for r in results if getattr(r.signals, f"{only}_rank", None) is not None]
            trimmed += len(results) < len(out.results)
        retrieved = [r.memory.metadata.get("dia_id") for r in results]
        s = score(q.evidence, retrieved) if q.evidence else None
        if s is not None:
            scored.append((q.category, s))
        records.append(
            {
                "ns": q.namespace,
                "qa": q.index,
                "category": q.category,
                "evidence": q.evidence,
                "retrieved": retrieved,
                "candidates": out.metrics.candidates,
                "score": s,
            }
        )
    return {
        "request": request,
        "only_channel": only,
        "trimmed_questions": trimmed,
        "summary": summarise(scored),
        "latency_ms": {"facade": latency(facade), **{f"server.{k}": latency(v) for k, v in server.items()}},
        "questions": records,
    }


def markdown(report: dict[str, Any]) -> str:
    runs = report["runs"]
    main = next(iter(runs.values()))
    ev = report["evidence"]
    lines = [
        f"LoCoMo (issue 4 protocol), {report['date']}, commit {report['revision']['commit']}"
        + (
            f" + uncommitted changes in services/ (diff {report['revision']['services_diff_sha256']})"
            if report["revision"]["uncommitted"]
            else ""
        ),
        "",
        f"{report['conversations']} conversations, {report['ingest']['memories']:,} memories, "
        f"{report['asked']:,} questions asked (categories 1-4), {ev['scored_questions']:,} scored; "
        f"{ev['ids']:,} evidence ids, {ev['unusable']} unusable ({', '.join(ev['unusable_tokens']) or 'none'}), "
        f"{ev['questions_without_usable_evidence']} question(s) left without any."
        + (f" Server settings: {json.dumps(report['settings_overrides'])}." if report["settings_overrides"] else ""),
        "",
        "| run | recall@5 | recall@10 | all evidence in top 10 | any evidence in top 10 | MRR@10 |",
        "|---|---|---|---|---|---|",
    ]
    for name, run in runs.items():
        a = run["summary"]["all"]
        lines.append(
            f"| {name} | {a['recall@5']:.3f} | {a['recall@10']:.3f} | {a['all@10']:.3f} | "
            f"{a['any@10']:.3f} | {a['mrr@10']:.3f} |"
        )
    for name, run in runs.items():
        if run["trimmed_questions"]:
            lines.append(
                f"\n{name}: {run['trimmed_questions']} question(s) had fewer than 10 hits from the "
                f"{run['only_channel']} channel; the padding (other candidates at score 0) is not counted."
            )
    lines += ["", f"Per category, {next(iter(runs))}:", ""]
    lines += ["| category | n | recall@5 | recall@10 | all in top 10 | MRR@10 |", "|---|---|---|---|---|---|"]
    for cat, label in CATEGORIES.items():
        c = main["summary"][str(cat)]
        lines.append(
            f"| {cat} {label} | {c['n']} | {c['recall@5']:.3f} | {c['recall@10']:.3f} | "
            f"{c['all@10']:.3f} | {c['mrr@10']:.3f} |"
        )
    if len(runs) > 1:
        lines += ["", "recall@10 per category:", ""]
        lines += ["| category | n | " + " | ".join(runs) + " |", "|---|---|" + "---|" * len(runs)]
        for cat, label in CATEGORIES.items():
            cells = " | ".join(f"{r['summary'][str(cat)]['recall@10']:.3f}" for r in runs.values())
            lines.append(f"| {cat} {label} | {main['summary'][str(cat)]['n']} | {cells} |")
    ing = report["ingest"]
    lines += [
        "",
        "| ingest (facade, embedding included) | value |",
        "|---|---|",
        f"| memories / entities | {ing['memories']:,} / {ing['entities']} |",
        f"| seconds | {ing['seconds']:.1f} |",
        f"| memories/s | {ing['memories_per_s']:.0f} |",
        "",
        "| search latency, ms | p50 | p95 | p99 | mean |",
        "|---|---|---|---|---|",
    ]
    for i, (name, run) in enumerate(runs.items()):
        cache = "query embedding uncached" if i == 0 else "cached"
        for key, lat in run["latency_ms"].items():
            if i > 0 and key not in ("facade", "server.sql"):
                continue
            label = f"{name} ({cache}): facade" if key == "facade" else f"  {key}"
            lines.append(f"| {label} | {lat['p50']:.1f} | {lat['p95']:.1f} | {lat['p99']:.1f} | {lat['mean']:.1f} |")
    load = f"load average before / after: {report['load_before']} / {report['load_after']}"
    lines += ["", f"{load}; run took {report['seconds']:.0f} s"]
    return "\n".join(lines) + "\n"


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--questions", type=int, default=0, help="cap on questions (0 = all 1,536)")
    parser.add_argument("--weights", default=None, help="SearchIn.weights as JSON, e.g. '{\"recency\": 0.5}'")
    parser.add_argument("--extra", default=None, help="other SearchIn fields as JSON, e.g. '{\"neighbours\": 1}'")
    parser.add_argument("--settings", default=None, help="server Settings overrides as JSON, e.g. '{\"port\": 1}'")
    parser.add_argument("--baselines", action="store_true", help="also lexical alone, dense alone, plain RRF")
    parser.add_argument("--text-only", action="store_true", help="store turns without their session ids")
    parser.add_argument("--name", default=None, help="name of the main run in the tables")
    parser.add_argument("--out", type=Path, default=None, help="JSON path (a .md beside it)")
    args = parser.parse_args()

    started = time.perf_counter()
    load_before = os.getloadavg()
    data = json.loads(args.data.read_text())[: args.conversations]
    request: dict[str, Any] = json.loads(args.extra) if args.extra else {}
    if args.weights:
        request["weights"] = {**request.get("weights", {}), **json.loads(args.weights)}
    questions = [q for conv in data for q in questions_of(conv)]
    if args.questions:
        questions = questions[: args.questions]
    refs = {conv["sample_id"]: reference_time(conv) for conv in data}

    from memvault.namespaces.schemas import NamespaceIn
    from memvault.principal import Principal

    overrides = json.loads(args.settings) if args.settings else {}
    async with embedded_app("memvault-quality-", **overrides) as stack:
        api = stack.api
        tenant = await api.create_tenant(f"quality-{uuid.uuid4().hex[:8]}")
        p = Principal.system(tenant.id, subject="bench")
        t0 = time.perf_counter()
        n_memories = 0
        for conv in data:
            await api.create_namespace(p, NamespaceIn(name=conv["sample_id"]))
            n_memories += await ingest(api, p, conv["sample_id"], conv, text_only=args.text_only)
        ingest_s = time.perf_counter() - t0

        name = args.name or (f"request {json.dumps(request)}" if request else "server defaults")
        runs = {name: await ask(api, p, questions, refs, request)}
        if args.baselines:
            for label, fields, only in baselines():
                runs[label] = await ask(api, p, questions, refs, {**request, **fields}, only)

    n_speakers = sum(len(speakers_of(conv)) for conv in data)
    report = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "revision": revision(),
        "command": " ".join(sys.argv),
        "text_only": args.text_only,
        "model": stack.embedder.model_id,
        "settings_overrides": overrides,
        "settings": server_settings(stack.settings),
        "conversations": len(data),
        "asked": len(questions),
        "evidence": {
            "ids": sum(len(q.evidence) for q in questions),
            "scored_questions": sum(1 for q in questions if q.evidence),
            "unusable": sum(len(q.unusable) for q in questions),
            "unusable_tokens": [f"{q.namespace} {t}" for q in questions for t in q.unusable],
            "questions_without_usable_evidence": sum(1 for q in questions if not q.evidence),
        },
        "ingest": {
            "memories": n_memories,
            "entities": n_speakers,
            "seconds": ingest_s,
            "memories_per_s": n_memories / ingest_s,
        },
        "runs": runs,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "seconds": time.perf_counter() - started,
    }
    out = args.out or RESULTS / f"locomo-{datetime.now(UTC):%Y-%m-%d-%H%M}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=str))
    md = markdown(report)
    out.with_suffix(".md").write_text(md)
    print(md)
    print(f"written: {out} and {out.with_suffix('.md').name}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
