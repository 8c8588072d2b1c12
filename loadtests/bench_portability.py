"""Import, export and forget of one namespace, timed through the facade, for two checkouts in one
run: one embedded PostgreSQL, and each checkout's code in its own processes, taking turns
(A, B, A, B, ...), so both meet the same database and the same load on the machine.

    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/bench_portability.py \\
        --ab /path/to/old/services services [--turns 2 --rounds 3 --memories 2000]

The file imported is made here: a few records of each kind written through the REST API, exported
with their vectors, and copied (new ids, new text) to ``--memories`` memories and as many events,
with entities, relations and traces beside them; the vectors travel in the file, so the import
embeds nothing. Each round, in a fresh tenant: import the file (timed), export it back with vectors
(timed, the stream read to its end), soft-forget one user's memories, hard-forget the namespace
(timed, its VACUUM included). Prints a markdown table of medians per checkout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from itertools import pairwise
from pathlib import Path
from typing import Any

from harness import MODEL, embedded_postgres, load_embedder

STEPS = ("import", "export", "forget_soft", "forget_hard")


async def _seeded_file(client: Any, headers: dict[str, str], memories: int) -> list[str]:
    """An export file of ``memories`` memories and as many events (see the module's docstring)."""
    ns = "/v1/namespaces/default"

    async def post(path: str, body: dict[str, Any]) -> Any:
        r = await client.post(f"{ns}{path}", json=body, headers=headers)
        assert r.status_code < 300, r.text
        return r.json()

    ana = await post("/entities", {"name": "Ana", "type": "person"})
    acme = await post("/entities", {"name": "Acme", "type": "organization"})
    await post("/relations", {"source_id": ana["id"], "type": "works_at", "target_id": acme["id"]})
    await post("/events", {"session_id": "s1", "user_id": "ana", "messages": [{"role": "user", "content": "hi"}]})
    await post("/memories", {"content": "Ana works at Acme", "user_id": "ana", "entity_ids": [ana["id"]]})
    trace = await post("/traces", {"task": "Book a flight", "user_id": "ana"})
    await post(f"/traces/{trace['id']}/steps", {"thought": "search", "tool_args": {"to": "LIS"}})
    r = await client.get(f"{ns}/export", params={"embeddings": "true"}, headers=headers)
    header, *records, _end = [json.loads(line) for line in r.text.splitlines()]
    first = {r["kind"]: r for r in reversed(records)}
    out: list[dict[str, Any]] = []
    entities = [{**first["entity"], "id": str(uuid.uuid4()), "name": f"entity {i}"} for i in range(memories // 10)]
    out += entities
    out += [
        {**first["relation"], "id": str(uuid.uuid4()), "source_id": a["id"], "target_id": b["id"]}
        for a, b in pairwise(entities)
    ]
    out += [{**first["session"], "id": f"s{i}", "user_id": f"user{i % 10}"} for i in range(memories // 100)]
    out += [
        {**first["event"], "id": str(uuid.uuid4()), "session_id": f"s{i % (memories // 100)}", "content": f"turn {i}"}
        for i in range(memories)
    ]
    out += [
        {
            **first["memory"],
            "id": str(uuid.uuid4()),
            "content": f"fact number {i} about user {i % 10}",
            "user_id": f"user{i % 10}",
            "entity_ids": [entities[i % len(entities)]["id"]],
            "history": [],
        }
        for i in range(memories)
    ]
    out += [
        {**first["trace"], "id": str(uuid.uuid4()), "task": f"task {i}", "steps": first["trace"]["steps"] * 1}
        for i in range(memories // 40)
    ]
    counts: dict[str, int] = {}
    for rec in out:
        counts[rec["kind"]] = counts.get(rec["kind"], 0) + 1
    return [json.dumps(x) for x in [header, *out, {"kind": "end", "counts": counts}]]


async def arm(owner_uri: str, rounds: int, memories: int) -> dict[str, list[float]]:
    """This process's code, ``rounds`` times; milliseconds per step."""
    import httpx

    from memvault.app import create_app
    from memvault.config import Settings
    from memvault.db.urls import resolve
    from memvault.forget.schemas import ForgetIn
    from memvault.principal import Principal

    urls = resolve(owner_uri, None, "memvault_app", embedded=True)
    conf = Settings(_env_file=None, database_url=owner_uri, scheduler_interval_s=0, job_sweep_interval_s=0)
    app = create_app(conf, urls=urls, embedder=load_embedder())
    times: dict[str, list[float]] = {s: [] for s in STEPS}
    async with app.router.lifespan_context(app):
        api = app.state.api
        seed = await api.create_tenant(f"seed-{uuid.uuid4().hex[:8]}")
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            lines = await _seeded_file(client, {"Authorization": f"Bearer {seed.api_key}"}, memories)
        for _ in range(rounds):
            tenant = await api.create_tenant(f"bench-{uuid.uuid4().hex[:8]}")
            p = Principal.system(tenant.id, subject="bench")
            started = time.perf_counter()
            await api.import_namespace(p, "default", lines)
            times["import"].append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            n = 0
            async for _line in await api.export_namespace(p, "default", embeddings=True):
                n += 1
            times["export"].append((time.perf_counter() - started) * 1000)
            assert n == len(lines), (n, len(lines))
            started = time.perf_counter()
            await api.forget(p, "default", ForgetIn(user_id="user3"))
            times["forget_soft"].append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            await api.forget(p, "default", ForgetIn(all=True, hard=True))
            times["forget_hard"].append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ab", nargs=2, metavar=("A", "B"), help="two services/ folders to compare")
    parser.add_argument("--turns", type=int, default=2, help="processes per checkout, taking turns")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per process")
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--arm", metavar="OWNER_URI", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        print(json.dumps(asyncio.run(arm(args.arm, args.rounds, args.memories))))
        return
    if not args.ab:
        parser.error("--ab A B is required")
    print(f"model {MODEL}; {args.memories} memories and events per file", file=sys.stderr)
    results: dict[str, dict[str, list[float]]] = {path: {s: [] for s in STEPS} for path in args.ab}
    with embedded_postgres("memvault-portability-bench-") as urls:
        owner = urls.owner.render_as_string(hide_password=False)
        for turn in range(args.turns):
            for path in args.ab:
                env = {**os.environ, "PYTHONPATH": str(Path(path).resolve())}
                cmd = [sys.executable, __file__, "--arm", owner, "--rounds", str(args.rounds)]
                out = subprocess.run(
                    [*cmd, "--memories", str(args.memories)], env=env, check=True, capture_output=True, text=True
                )
                for step, ms in json.loads(out.stdout.splitlines()[-1]).items():
                    results[path][step] += ms
                print(f"turn {turn + 1}: {path} done", file=sys.stderr)
    print("| checkout | " + " | ".join(f"{s} median ms (min)" for s in STEPS) + " |")
    print("|---|" + "---|" * len(STEPS))
    for path, times in results.items():
        cells = [f"{statistics.median(times[s]):,.0f} ({min(times[s]):,.0f})" for s in STEPS]
        print(f"| {path} | " + " | ".join(cells) + " |")
    for path, times in results.items():
        print(f"\n{path}, every round (ms, in the order run):")
        for s in STEPS:
            print(f"- {s}: " + ", ".join(f"{ms:,.0f}" for ms in times[s]))


if __name__ == "__main__":
    main()
