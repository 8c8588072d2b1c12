"""Record what the timeline sees on loadtests/quality/evolving.py's questions (issue 30), for offline
study of how a subject's versions are told from its other facts (evolving_maxsim.py).

    HF_HUB_OFFLINE=1 PYTHONPATH=services .venv/bin/python loadtests/quality/evolving_record.py \
        --seed 30 --out /tmp/evolving-30.pkl [--group 1]

For every question with a time cue: the question, its kind, the expected memory, the generator's
subject and attribute, the cues, and the fused hits ``timeline.arrange`` was given (id, the
generator's ref, content, dates, fused score, the time channel's part, channels, sentence vector).
Pickled (not committed).
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from evolving import Facade, body_of, generate, owners_of, rows_of


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--subjects", type=int, default=60)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--group", type=int, default=0, help="as evolving.py's --group: owners of this many subjects")
    args = parser.parse_args()
    data = generate(args.seed, args.subjects)
    owners = owners_of(data, args.group)
    from harness import embedded_app

    from memvault.namespaces.schemas import NamespaceIn
    from memvault.principal import Principal
    from memvault.retrieval import hybrid, timeline

    captured: list[dict[str, Any]] = []
    refs: dict[str, str] = {}
    real = timeline.arrange

    def arrange(query, hits, cues, vectors, limit, time_part=None):  # type: ignore[no-untyped-def]
        part = time_part or (lambda h: 0.0)
        captured.append(
            {
                "query": query,
                "cues": cues,
                "limit": limit,
                "hits": [
                    {
                        "id": str(h.memory.id),
                        "ref": refs.get(str(h.memory.id), "?"),
                        "content": h.memory.content,
                        "valid_from": h.memory.valid_from,
                        "created_at": h.memory.created_at,
                        "seq": h.memory.seq,
                        "score": h.score,
                        "time_part": part(h),
                        "channels": dict(h.channels),
                    }
                    for h in hits
                ],
                "vectors": {str(k): list(v) for k, v in vectors.items()},
            }
        )
        return real(query, hits, cues, vectors, limit, time_part)

    hybrid.timeline.arrange = arrange  # type: ignore[method-assign]
    out: list[dict[str, Any]] = []
    async with embedded_app("memvault-evolving-rec-") as stack:
        tenant = await stack.api.create_tenant(f"evolving-{uuid.uuid4().hex[:8]}")
        p = Principal.system(tenant.id, subject="bench")
        ns = f"evolving-{uuid.uuid4().hex[:8]}"
        await stack.api.create_namespace(p, NamespaceIn(name=ns))
        client = Facade(stack.api, p, ns)
        rows = rows_of(data, owners)
        for i in range(0, len(rows), 500):
            stored = await client.store(rows[i : i + 500])
            for v, mid in zip(data.memories[i : i + 500], stored, strict=True):
                refs[mid] = v.ref
        for q in data.questions:
            captured.clear()
            res = await client.search(body_of(q, owners, {}))
            got = [refs.get(r["memory"]["id"], "?") for r in res["results"]]
            out.append(
                {
                    "kind": q.kind,
                    "query": q.text,
                    "expected": q.expected,
                    "subject": q.subject,
                    "attribute": q.attribute,
                    "retrieved": got,
                    "cues_out": res["metrics"].get("cues", {}),
                    "arrange": captured[0] if captured else None,
                }
            )
    args.out.write_bytes(pickle.dumps(out))
    hit1: dict[str, list[bool]] = {}
    for r in out:
        hit1.setdefault(r["kind"], []).append(bool(r["retrieved"]) and r["retrieved"][0] == r["expected"])
    for k, xs in hit1.items():
        print(f"{k}: n={len(xs)} recall@1={sum(xs) / len(xs):.3f}")
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
