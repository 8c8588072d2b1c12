"""What every benchmark here shares: where LoCoMo is, how its sessions read, percentiles, and the
embedded stack (a throwaway PostgreSQL + pgvector, migrated; the local MiniLM; the app and its
facade).

LoCoMo is read in place from ../shared/datasets (licence CC BY-NC 4.0: never copied into the repo).
Heavy imports stay inside the functions, so the scoring helpers and their tests load without them.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10.json"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def sessions(conv: dict[str, Any]) -> Iterator[tuple[int, str, list[dict[str, Any]]]]:
    """(n, date_time as written, turns) for session 1, 2, ... of one LoCoMo conversation."""
    c = conv["conversation"]
    n = 1
    while f"session_{n}" in c:
        yield n, c.get(f"session_{n}_date_time", ""), c[f"session_{n}"]
        n += 1


def turns_of(conv: dict[str, Any]) -> list[dict[str, Any]]:
    """The plain protocol of bench_search and bench_mcp: ``Speaker: text``, session and dia_id."""
    return [
        {
            "content": f"{t['speaker']}: {t['text']}",
            "session_id": f"session_{n}",
            "metadata": {"dia_id": t["dia_id"]},
            "type": "event",
        }
        for n, _, turns in sessions(conv)
        for t in turns
    ]


@contextmanager
def embedded_postgres(prefix: str, keep: Path | None = None) -> Iterator[Any]:
    """A migrated PostgreSQL; yields its DatabaseUrls. Throwaway in a temp dir, deleted after; or,
    with ``keep``, in ``keep/pg``, stopped but kept after so that a later run can reuse its data."""
    from memvault.db import embedded, migrate
    from memvault.db.urls import resolve

    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    tmp = keep or Path(tempfile.mkdtemp(prefix=prefix))
    # Configured as `memvault serve` configures its embedded server.
    server = embedded.server(tmp / "pg", embedded.settings(), cleanup_mode="stop" if keep else "delete")
    try:
        urls = resolve(server.get_uri(), None, "memvault_app", embedded=True)
        migrate.upgrade(urls.owner, "memvault_app", allow_login=True)
        yield urls
    finally:
        server.cleanup()
        if keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


def load_embedder(**options: Any) -> Any:
    from memvault.embeddings.local import LocalEmbedder

    # The int8 experiment of issue 25 (bench_embedding_cpu.py): the quality runs with that model.
    options.setdefault("quantize", os.environ.get("MEMVAULT_EMBEDDING_QUANTIZE", "none"))
    embedder = LocalEmbedder(MODEL, dim=384, **options)
    embedder.load()
    return embedder


def _proc_cpu(pid: int, children: bool) -> float:
    """User + system seconds of one process (and, with ``children``, of its reaped children)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


async def postmaster_of(api: Any) -> int:
    """The pid of the embedded PostgreSQL's postmaster behind ``api`` (for ``tree_cpu``)."""
    import psutil
    from sqlalchemy import text

    async with api._db.owner() as s:
        backend = (await s.execute(text("SELECT pg_backend_pid()"))).scalar_one()
    return psutil.Process(backend).ppid()


async def cpu_per_request(
    client: Any, postmaster: int, request: tuple[str, str, Any], headers: dict[str, str], n: int
) -> tuple[float, float, float]:
    """``n`` of ``request`` (method, url, JSON body) one after another: this process's CPU ms and
    PostgreSQL's per request, and the median wall ms."""
    method, url, body = request
    walls = []
    cpu0, pg0 = time.process_time(), tree_cpu(postmaster)
    for _ in range(n):
        began = time.perf_counter()
        (await client.request(method, url, json=body, headers=headers)).raise_for_status()
        walls.append(time.perf_counter() - began)
    cpu = (time.process_time() - cpu0) / n * 1e3
    pg = (tree_cpu(postmaster) - pg0) / n * 1e3
    return cpu, pg, statistics.median(walls) * 1e3


def tree_cpu(root: int | None) -> float:
    """The CPU of a process and every descendant, alive or reaped (PostgreSQL's backends end and
    are reaped by the postmaster; their time is then in its cutime)."""
    import psutil

    if root is None:
        return 0.0
    total = _proc_cpu(root, children=True)
    try:
        kids = psutil.Process(root).children(recursive=True)
    except psutil.Error:
        return total
    for kid in kids:
        total += _proc_cpu(kid.pid, children=False)
    return total


@dataclass
class Stack:
    app: Any
    api: Any  # NamespaceAPI
    embedder: Any  # LocalEmbedder
    urls: Any  # DatabaseUrls
    settings: Any


@asynccontextmanager
async def embedded_app(
    prefix: str = "memvault-bench-",
    *,
    keep: Path | None = None,
    embedder_options: dict[str, Any] | None = None,
    wrap_embedder: Callable[[Any], Any] | None = None,
    **settings: Any,
) -> AsyncIterator[Stack]:
    """The app over an embedded PostgreSQL with its lifespan entered: ``stack.api`` is the facade.
    ``keep``: see embedded_postgres; ``embedder_options``: LocalEmbedder's keyword arguments;
    ``wrap_embedder``: what the app embeds with, given the model (``stack.embedder`` is then that)."""
    from memvault.app import create_app
    from memvault.config import Settings

    with embedded_postgres(prefix, keep) as urls:
        embedder = load_embedder(**(embedder_options or {}))
        if wrap_embedder is not None:
            embedder = wrap_embedder(embedder)
        conf = Settings(_env_file=None, database_url=urls.owner.render_as_string(hide_password=False), **settings)
        app = create_app(conf, urls=urls, embedder=embedder)
        async with app.router.lifespan_context(app):
            yield Stack(app=app, api=app.state.api, embedder=embedder, urls=urls, settings=conf)


async def insert_memories(
    api: Any, tenant_id: Any, namespace_id: Any, memories: list[tuple[str, list[float]]], model_id: str
) -> None:
    """Insert ``memories`` (content, vector) as namespace facts straight into the table, as the
    owner, a thousand per statement: no embedding, no write path, the newest first by a second
    each. For benchmarks of what reads or maintains many memories."""
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import insert

    from memvault.memories.models import Memory
    from memvault.memories.service import content_hash

    now = datetime.now(UTC)
    rows = [
        {
            "tenant_id": tenant_id,
            "namespace_id": namespace_id,
            "type": "fact",
            "content": c,
            "scope": "namespace",
            "embedding": v,
            "embedding_model": model_id,
            "content_hash": content_hash(c),
            "created_by": "bench",
            "created_at": now - timedelta(seconds=i),
        }
        for i, (c, v) in enumerate(memories)
    ]
    async with api._db.owner() as s:
        for i in range(0, len(rows), 1000):
            await s.execute(insert(Memory), rows[i : i + 1000])
