"""Inferred conversations (issue 30), A/B in one run: what they cost a write and a search.

    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/quality/inferred_ab.py [--conversations 4] [--rounds 4]
        [--batch 20] [--questions 300]

Writes: LoCoMo turns stored text-only (type event, valid_from, no session id) through the facade
in batches of ``--batch``, alternately with migration 0033's index (A) and without it (B), ABBA
over ``--rounds`` rounds, each variant into namespaces of its own. The only write-path cost of
inferring is that index: nothing else runs on a write. The model's time is taken out (each text
is embedded once, before the clock starts, and served again from memory) so that the database's
share is not lost in it.

Searches: the same questions against the last round's two copies of the data, one namespace with
the default gap (inferred) and its twin with ``session_gap_minutes`` 0 (off), and a third copy
stored with the session ids (S: what a client that sends them gets, the context channel's cost
before issue 30), rotating which goes first; server SQL and total milliseconds, and recall@10 on
each.

LoCoMo is read in place from ../shared/datasets (CC BY-NC 4.0: never copied into the repo).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # loadtests/: the shared harness

from harness import DEFAULT_DATA, embedded_app, pct
from protocol import memories_of, questions_of, reference_time, score

INDEX = """
    CREATE INDEX IF NOT EXISTS ix_memories_alone
        ON memories (
            tenant_id, namespace_id, scope, (coalesce(user_id, '')), (coalesce(agent_id, '')),
            (coalesce(valid_from, created_at)), seq
        )
        WHERE session_id IS NULL AND namespace_id IS NOT NULL AND type = 'event'
"""


class Remembered:
    """The model, with each document's vector kept: a write measured again costs no model time."""

    def __init__(self, model: Any) -> None:
        self._model, self._seen = model, {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    async def embed(self, texts: Sequence[str], *, tenant: Hashable | None = None) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._seen]
        if missing:
            self._seen.update(zip(missing, await self._model.embed(missing, tenant=tenant), strict=True))
        return [self._seen[t] for t in texts]


def summary(xs: list[float]) -> str:
    return f"{pct(xs, 50):.1f} | {pct(xs, 95):.1f} | {statistics.fmean(xs):.1f}"


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--batch", type=int, default=20, help="memories per write (a live client sends few)")
    parser.add_argument("--questions", type=int, default=300)
    args = parser.parse_args()

    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    from memvault.memories.schemas import MemoryIn
    from memvault.namespaces.schemas import NamespaceIn, NamespacePatch, NamespaceSettings, SearchSettings
    from memvault.principal import Principal
    from memvault.retrieval.schemas import SearchIn

    data = json.loads(args.data.read_text())[: args.conversations]
    rows = {c["sample_id"]: [{**m, "session_id": None} for m in memories_of(c)] for c in data}
    questions = [q for c in data for q in questions_of(c)][: args.questions]
    refs = {c["sample_id"]: reference_time(c) for c in data}

    async with embedded_app("memvault-inferred-ab-", wrap_embedder=Remembered) as stack:
        api = stack.api
        owner = create_async_engine(stack.urls.owner.render_as_string(hide_password=False))
        tenant = await api.create_tenant(f"inferred-ab-{uuid.uuid4().hex[:8]}")
        p = Principal.system(tenant.id, subject="bench")
        await stack.embedder.embed([m["content"] for rs in rows.values() for m in rs])

        async def index(on: bool) -> None:
            async with owner.begin() as c:
                await c.execute(text(INDEX if on else "DROP INDEX IF EXISTS ix_memories_alone"))
                await c.execute(text("ANALYZE memories"))

        writes: dict[str, list[float]] = {"A": [], "B": []}
        spaces: dict[str, dict[str, str]] = {}
        for r in range(args.rounds):
            for variant in "AB" if r % 2 == 0 else "BA":
                await index(variant == "A")
                spaces[variant] = {}
                for sid, rs in rows.items():
                    ns = f"{sid}-{variant}{r}"
                    await api.create_namespace(p, NamespaceIn(name=ns))
                    spaces[variant][sid] = ns
                    for i in range(0, len(rs), args.batch):
                        bodies = [MemoryIn(**m) for m in rs[i : i + args.batch]]
                        t0 = time.perf_counter()
                        await api.store_many(p, ns, bodies)
                        writes[variant].append((time.perf_counter() - t0) * 1000)
        await index(True)
        await owner.dispose()
        spaces["S"] = {}
        for conv in data:
            ns = spaces["S"][conv["sample_id"]] = f"{conv['sample_id']}-S"
            await api.create_namespace(p, NamespaceIn(name=ns))
            await api.store_many(p, ns, [MemoryIn(**m) for m in memories_of(conv)])
        for ns in spaces["B"].values():
            off = NamespaceSettings(search=SearchSettings(session_gap_minutes=0))
            await api.update_namespace(p, ns, NamespacePatch(settings=off))

        sql: dict[str, list[float]] = {"A": [], "B": [], "S": []}
        total: dict[str, list[float]] = {"A": [], "B": [], "S": []}
        recall: dict[str, list[float]] = {"A": [], "B": [], "S": []}
        for n, q in enumerate(questions):
            for variant in ("ABS", "BSA", "SAB")[n % 3]:
                req = SearchIn(query=q.text, limit=10, reference_time=refs[q.namespace])
                out = await api.search(p, spaces[variant][q.namespace], req)
                sql[variant].append(out.metrics.timings_ms["sql"])
                total[variant].append(out.metrics.timings_ms["total"])
                if q.evidence:
                    retrieved = [h.memory.metadata.get("dia_id") for h in out.results]
                    recall[variant].append(score(q.evidence, retrieved)["recall@10"])

    n_rows = sum(len(rs) for rs in rows.values())
    print(f"{len(data)} conversations, {n_rows:,} turns text-only, {args.rounds} rounds ABBA, batches of {args.batch}")
    print(f"{len(questions)} questions, alternating order; model time excluded from writes\n")
    print("| ms | p50 | p95 | mean |\n|---|---|---|---|")
    print(f"| write, with the index (A) | {summary(writes['A'])} |")
    print(f"| write, without it (B) | {summary(writes['B'])} |")
    print(f"| search sql, inferred (A) | {summary(sql['A'])} |")
    print(f"| search sql, gap 0 (B) | {summary(sql['B'])} |")
    print(f"| search total, inferred (A) | {summary(total['A'])} |")
    print(f"| search total, gap 0 (B) | {summary(total['B'])} |")
    print(f"| search sql, session ids (S) | {summary(sql['S'])} |")
    print(f"| search total, session ids (S) | {summary(total['S'])} |")
    ratio_w = statistics.fmean(writes["A"]) / statistics.fmean(writes["B"])
    ratio_s = statistics.fmean(sql["A"]) / statistics.fmean(sql["B"])
    ratio_c = statistics.fmean(sql["A"]) / statistics.fmean(sql["S"])
    print(f"\nwrite A/B (mean): {ratio_w:.3f}; search sql A/B (mean): {ratio_s:.3f}; A/S: {ratio_c:.3f}")
    print(
        f"recall@10: inferred {statistics.fmean(recall['A']):.3f}, gap 0 {statistics.fmean(recall['B']):.3f}, "
        f"session ids {statistics.fmean(recall['S']):.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
