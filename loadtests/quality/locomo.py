"""Retrieval quality on LoCoMo, the protocol of issue 4, through the facade on the embedded
PostgreSQL and the local MiniLM (all-MiniLM-L6-v2).

    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/quality/locomo.py [--conversations 10] [--questions 0]
        [--weights JSON] [--extra JSON] [--baselines] [--text-only] [--out PATH]
        [--base URL --key KEY]

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

``--base URL --key KEY`` runs the same protocol against a deployed server through its REST API
(httpx): each conversation goes into a new namespace ``<sample_id>-<run id>`` of the key's tenant
(the key needs write and read; the namespaces stay, to be looked at or deleted), entities and
memories through their routes, questions through ``/search``. Latencies are then the client's
(network included) and the server's own ``metrics.timings_ms``; ``--settings`` does not apply.

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

import httpx

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


class Facade:
    """The in-process facade over the embedded PostgreSQL: what the figures in docs/benchmarks.md
    measure unless they say otherwise."""

    label = "facade"

    def __init__(self, api: Any, p: Any) -> None:
        self.api, self.p = api, p

    async def namespace(self, name: str) -> str:
        from memvault.namespaces.schemas import NamespaceIn

        await self.api.create_namespace(self.p, NamespaceIn(name=name))
        return name

    async def ingest(self, ns: str, conv: dict[str, Any], *, text_only: bool) -> int:
        return await ingest(self.api, self.p, ns, conv, text_only=text_only)

    async def search(self, ns: str, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """The response as REST would return it, and the milliseconds the facade took."""
        from memvault.retrieval.schemas import SearchIn

        t0 = time.perf_counter()
        out = await self.api.search(self.p, ns, SearchIn(**body))
        ms = (time.perf_counter() - t0) * 1000
        return out.model_dump(mode="json"), ms


class Remote:
    """A deployed server through its REST API, as any client would use it."""

    label = "client"

    def __init__(self, client: httpx.AsyncClient, run: str) -> None:
        self.client, self.run = client, run

    async def call(self, method: str, path: str, **kw: Any) -> Any:
        r = await self.client.request(method, path, **kw)
        if r.status_code >= 400:
            raise SystemExit(f"{method} {path}: HTTP {r.status_code} {r.text[:500]}")
        return r.json()

    async def namespace(self, name: str) -> str:
        # A new namespace each run: a deployed server may hold earlier runs' (or anyone's) data.
        remote = f"{name}-{self.run}"
        await self.call("POST", "/v1/namespaces", json={"name": remote})
        return remote

    async def ingest(self, ns: str, conv: dict[str, Any], *, text_only: bool, batch: int = 500) -> int:
        """As ``ingest``: an entity per speaker, then the turns in batches, linked to their speaker."""
        base = f"/v1/namespaces/{ns}"
        entity = {}
        for name in speakers_of(conv):
            person = {"name": name, "type": "person"}
            e = await self.call("POST", f"{base}/entities", params={"upsert": "true"}, json=person)
            entity[name] = e["id"]
        rows = []
        for m in memories_of(conv):
            row = {**m, "valid_from": m["valid_from"].isoformat(), "entity_ids": [entity[m["metadata"]["speaker"]]]}
            if text_only:
                row.pop("session_id")
            rows.append(row)
        for i in range(0, len(rows), batch):
            await self.call("POST", f"{base}/memories/batch", json={"memories": rows[i : i + batch]})
        return len(rows)

    async def search(self, ns: str, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """The response, and the milliseconds the request took (network included)."""
        payload = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in body.items()}
        t0 = time.perf_counter()
        out = await self.call("POST", f"/v1/namespaces/{ns}/search", json=payload)
        return out, (time.perf_counter() - t0) * 1000


async def ask(
    backend: Facade | Remote,
    spaces: dict[str, str],
    questions: list[Question],
    refs: dict[str, datetime],
    request: dict[str, Any],
    only: str | None = None,
) -> dict[str, Any]:
    """Search every question (in the namespace ``spaces`` gives its conversation); score, time,
    and keep what was retrieved."""
    caller: list[float] = []
    server: dict[str, list[float]] = {}
    records, scored, trimmed = [], [], 0
    for q in questions:
        body = {"query": q.text, "limit": 10, "reference_time": refs[q.namespace], **request}
        out, ms = await backend.search(spaces[q.namespace], body)
        caller.append(ms)
        for key, ms in with_rest(out["metrics"]["timings_ms"]).items():
            server.setdefault(key, []).append(ms)
        results = out["results"]
        if only is not None:
            results = [r for r in results if r["signals"].get(f"{only}_rank") is not None]
            trimmed += len(results) < len(out["results"])
        retrieved = [r["memory"]["metadata"].get("dia_id") for r in results]
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
                "candidates": out["metrics"]["candidates"],
                "score": s,
            }
        )
    return {
        "request": request,
        "only_channel": only,
        "trimmed_questions": trimmed,
        "summary": summarise(scored),
        "latency_ms": {backend.label: latency(caller), **{f"server.{k}": latency(v) for k, v in server.items()}},
        "questions": records,
    }


def markdown(report: dict[str, Any]) -> str:
    runs = report["runs"]
    main = next(iter(runs.values()))
    ev = report["evidence"]
    lines = [
        f"LoCoMo (issue 4 protocol), {report['date']}, "
        + (f"server {report['base']} (REST), harness at " if report.get("base") else "")
        + f"commit {report['revision']['commit']}"
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
        f"| ingest ({report['via']}, embedding included) | value |",
        "|---|---|",
        f"| memories / entities | {ing['memories']:,} / {ing['entities']} |",
        f"| seconds | {ing['seconds']:.1f} |",
        f"| memories/s | {ing['memories_per_s']:.0f} |",
        "",
        "| search latency, ms | p50 | p95 | p99 | mean |",
        "|---|---|---|---|---|",
    ]
    via = "client" if report.get("base") else "facade"
    for i, (name, run) in enumerate(runs.items()):
        cache = "query embedding uncached" if i == 0 else "cached"
        for key, lat in run["latency_ms"].items():
            if i > 0 and key not in (via, "server.sql"):
                continue
            label = f"{name} ({cache}): {via}" if key == via else f"  {key}"
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
    parser.add_argument("--base", default=None, help="a deployed server's URL: run through its REST API")
    parser.add_argument("--key", default=None, help="with --base: an API key of the tenant to run in")
    args = parser.parse_args()
    if (args.base is None) != (args.key is None):
        parser.error("--base and --key go together")
    if args.base and args.settings:
        parser.error("--settings configures the embedded server; a deployed one has its own")

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
    overrides = json.loads(args.settings) if args.settings else {}
    name = args.name or (f"request {json.dumps(request)}" if request else "server defaults")

    async def measure(backend: Facade | Remote) -> tuple[dict[str, Any], dict[str, Any]]:
        t0 = time.perf_counter()
        n_memories = 0
        spaces = {}
        for conv in data:
            spaces[conv["sample_id"]] = ns = await backend.namespace(conv["sample_id"])
            n_memories += await backend.ingest(ns, conv, text_only=args.text_only)
        ingest_s = time.perf_counter() - t0
        runs = {name: await ask(backend, spaces, questions, refs, request)}
        if args.baselines:
            for label, fields, only in baselines():
                runs[label] = await ask(backend, spaces, questions, refs, {**request, **fields}, only)
        ingested = {"memories": n_memories, "seconds": ingest_s, "memories_per_s": n_memories / ingest_s}
        return runs, ingested

    server: dict[str, Any]
    if args.base:
        run = uuid.uuid4().hex[:8]
        headers = {"Authorization": f"Bearer {args.key}"}
        async with httpx.AsyncClient(base_url=args.base, headers=headers, timeout=120) as client:
            runs, ingested = await measure(Remote(client, run))
        server = {"base": args.base, "namespaces_suffix": run, "model": None, "settings": None}
    else:
        from memvault.principal import Principal

        async with embedded_app("memvault-quality-", **overrides) as stack:
            tenant = await stack.api.create_tenant(f"quality-{uuid.uuid4().hex[:8]}")
            runs, ingested = await measure(Facade(stack.api, Principal.system(tenant.id, subject="bench")))
        server = {"base": None, "model": stack.embedder.model_id, "settings": server_settings(stack.settings)}

    n_speakers = sum(len(speakers_of(conv)) for conv in data)
    report = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "revision": revision(),
        "command": " ".join(a if a != args.key else "***" for a in sys.argv),
        "text_only": args.text_only,
        "via": "REST" if args.base else "facade",
        **server,
        "settings_overrides": overrides,
        "conversations": len(data),
        "asked": len(questions),
        "evidence": {
            "ids": sum(len(q.evidence) for q in questions),
            "scored_questions": sum(1 for q in questions if q.evidence),
            "unusable": sum(len(q.unusable) for q in questions),
            "unusable_tokens": [f"{q.namespace} {t}" for q in questions for t in q.unusable],
            "questions_without_usable_evidence": sum(1 for q in questions if not q.evidence),
        },
        "ingest": {**ingested, "entities": n_speakers},
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
