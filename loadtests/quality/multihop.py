"""Multi-hop and open-domain steps on LoCoMo (issue 30, item 3): several search variants on the
same ingested data in one run, so their recall and latency compare within one machine state.

    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/quality/multihop.py [--conversations 10]
        [--questions 0] [--text-only] [--entities] [--variant NAME=JSON ...] [--out PATH]

Ingestion and scoring are locomo.py's (issue 4 protocol: every turn a memory linked to its
speaker's entity, categories 1-4, recall@10 of the evidence turns). ``--entities`` also links each
turn to the names the rule extractor finds in it (extraction/rules.py ``find_entities``: places,
people, titles), one entity per distinct name in the conversation, as a client that extracts
entities would: the entity hop (``SearchIn.hops``) then has bridges to follow, where with the
speakers alone (each linked to every one of their turns: hubs) it has none.

Variants default to the server's defaults and ``{"hops": true}``; each ``--variant`` adds one
(``NAME=JSON``: SearchIn fields). The first variant's queries embed uncached, the later ones'
cached: compare ``sql`` and ``hops`` times, not ``total``. Prints a markdown table; writes JSON
(default loadtests/quality/results/multihop-<date>.json)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # loadtests/: the shared harness
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import DEFAULT_DATA, embedded_app
from locomo import RESULTS, Facade, ask, ingest, revision
from protocol import CATEGORIES, memories_of, questions_of, reference_time, speakers_of


async def ingest_named(api: Any, p: Any, ns: str, conv: dict[str, Any], *, text_only: bool) -> int:
    """locomo.ingest, each turn also linked to the entities named in it (rule extractor); returns
    how many such links."""
    from memvault.entities.schemas import EntityIn
    from memvault.extraction.rules import find_entities
    from memvault.memories.schemas import MemoryIn

    ids: dict[str, Any] = {}

    async def entity(name: str, kind: str) -> Any:
        if name not in ids:
            e, _ = await api.upsert_entity(p, ns, EntityIn(name=name, type=kind))
            ids[name] = e.id
        return ids[name]

    for name in speakers_of(conv):
        await entity(name, "person")
    rows, links = [], 0
    for m in memories_of(conv):
        speaker = m["metadata"]["speaker"]
        text = m["content"].partition(": ")[2]
        named = [await entity(n, k) for n, k in find_entities(text, speaker) if n != speaker]
        links += len(named)
        dropped = {"session_id": None} if text_only else {}
        rows.append(MemoryIn(**{**m, **dropped}, entity_ids=[ids[speaker], *dict.fromkeys(named)]))
    for i in range(0, len(rows), 500):
        await api.store_many(p, ns, rows[i : i + 500])
    return links


def parse_variants(raw: list[str]) -> list[tuple[str, dict[str, Any]]]:
    variants = [("server defaults", {}), ("hops", {"hops": True})]
    for item in raw:
        name, _, body = item.partition("=")
        variants.append((name, json.loads(body)))
    return variants


def table(runs: dict[str, Any]) -> str:
    names = list(runs)
    lines = ["| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    first = runs[names[0]]["summary"]
    lines.append(
        "| recall@10, all | " + " | ".join(f"{r['summary']['all']['recall@10']:.3f}" for r in runs.values()) + " |"
    )
    for cat, label in CATEGORIES.items():
        cells = " | ".join(f"{r['summary'][str(cat)]['recall@10']:.3f}" for r in runs.values())
        lines.append(f"| {label} (n={first[str(cat)]['n']}) | {cells} |")
    for key in ("server.sql", "server.hops", "server.total"):
        cells = []
        for r in runs.values():
            lat = r["latency_ms"].get(key)
            cells.append(f"{lat['p50']:.1f} / {lat['p95']:.1f}" if lat else "-")
        lines.append(f"| {key} ms p50 / p95 | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--questions", type=int, default=0)
    parser.add_argument("--text-only", action="store_true")
    parser.add_argument("--entities", action="store_true", help="link each turn to the names found in it")
    parser.add_argument("--variant", action="append", default=[], help="NAME=JSON of SearchIn fields")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    started = time.perf_counter()
    data = json.loads(args.data.read_text())[: args.conversations]
    questions = [q for conv in data for q in questions_of(conv)]
    if args.questions:
        questions = questions[: args.questions]
    refs = {conv["sample_id"]: reference_time(conv) for conv in data}

    from memvault.namespaces.schemas import NamespaceIn
    from memvault.principal import Principal

    async with embedded_app("memvault-multihop-") as stack:
        api = stack.api
        tenant = await api.create_tenant(f"multihop-{uuid.uuid4().hex[:8]}")
        p = Principal.system(tenant.id, subject="bench")
        links = 0
        for conv in data:
            await api.create_namespace(p, NamespaceIn(name=conv["sample_id"]))
            if args.entities:
                links += await ingest_named(api, p, conv["sample_id"], conv, text_only=args.text_only)
            else:
                await ingest(api, p, conv["sample_id"], conv, text_only=args.text_only)
        backend, spaces = Facade(api, p), {conv["sample_id"]: conv["sample_id"] for conv in data}
        runs = {
            name: await ask(backend, spaces, questions, refs, request) for name, request in parse_variants(args.variant)
        }

    md = (
        f"LoCoMo, {len(data)} conversations, {len(questions)} questions"
        + (", text only" if args.text_only else "")
        + (f", {links:,} entity links from the rule extractor" if args.entities else "")
        + f"; commit {revision()['commit']}\n\n"
        + table(runs)
    )
    out = args.out or RESULTS / f"multihop-{datetime.now(UTC):%Y-%m-%d-%H%M}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "command": " ".join(sys.argv),
                "revision": revision(),
                "links": links,
                "runs": runs,
                "seconds": time.perf_counter() - started,
            },
            indent=1,
            default=str,
        )
    )
    print(md)
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
