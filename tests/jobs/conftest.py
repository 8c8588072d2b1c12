from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from tests.jobs.helpers import Worker


@pytest.fixture(scope="session")
async def inproc_app(settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder) -> AsyncIterator[object]:
    """The app as `memvault serve` runs it without Redis: jobs on threads inside the process.
    No start-up recovery and no sweep: other tests leave jobs queued on purpose."""
    local = settings.model_copy(update={"redis_url": None, "job_recover_on_start": False, "job_sweep_interval_s": 0})
    application = create_app(local, urls=pg_urls, embedder=embedder)
    # As in tests/conftest.py: the lifespan holds anyio task groups, which must be left in the
    # task that entered them, so it runs in a task of its own.
    ready, stop = asyncio.Event(), asyncio.Event()

    async def serve() -> None:
        async with application.router.lifespan_context(application):
            ready.set()
            await stop.wait()

    task = asyncio.create_task(serve())
    await asyncio.wait([task, asyncio.create_task(ready.wait())], return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()
    yield application
    stop.set()
    await task


@pytest.fixture
async def inproc(inproc_app: object) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=inproc_app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test") as c:
        yield c


@pytest.fixture
def workers(settings: Settings, redis_url: str, tmp_path: Path) -> Iterator[list[Worker]]:
    """`memvault` processes a test starts (helpers.start); stopped with SIGTERM when it ends."""
    started: list[Worker] = []
    yield started
    for w in started:
        w.stop()
