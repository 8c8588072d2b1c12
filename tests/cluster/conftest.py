"""A Citus cluster for the session: a coordinator and two workers of the cached build
(infra/scripts/build_citus.sh), migrated to head, and an app served on it through httpx's ASGI
transport. Fixtures of their own names (``citus_*``), so that the single-node ones of tests/conftest.py
stay as they are in the same session: tests here compare the two."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from memvault.api import NamespaceAPI
from memvault.app import create_app
from memvault.cluster import build, local
from memvault.config import Settings
from memvault.db import migrate
from memvault.db.urls import DatabaseUrls, resolve
from memvault.embeddings.local import LocalEmbedder
from tests.conftest import Tenant, make_tenant, running


def _free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports nothing listens on, from 20000 up."""
    for base in range(20000 + os.getpid() % 1000 * 10, 40000, count):
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free ports")


@pytest.fixture(scope="session")
def citus_cluster() -> Iterator[local.Cluster]:
    if not build.built(build.build_dir()):
        message = "Citus is not built: run infra/scripts/build_citus.sh (infra/scripts/test.sh does)"
        if os.environ.get("MEMVAULT_REQUIRE_CITUS"):
            pytest.fail(message)
        pytest.skip(message)
    folder = Path(tempfile.mkdtemp(prefix="memvault-test-citus-"))
    cluster = local.up(folder, workers=2, port=_free_ports(3))
    try:
        yield cluster
    finally:
        local.down(folder)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def citus_urls(citus_cluster: local.Cluster) -> DatabaseUrls:
    # The app role logs in by itself (trust on 127.0.0.1), as with the embedded server: Citus
    # opens its connections to the workers as the current user.
    urls = resolve(citus_cluster.uri(), None, "memvault_app", embedded=True)
    migrate.upgrade(urls.owner, "memvault_app", allow_login=True)
    return urls


def on_every_shard(cluster: local.Cluster, table: str, where: str) -> int:
    """Rows of ``table`` matching ``where`` in all its shards, counted on the workers themselves."""
    command = f"SELECT count(*) FROM %s WHERE {where}"
    with psycopg.connect(cluster.uri(), autocommit=True) as conn:
        rows = conn.execute("SELECT result FROM run_command_on_shards(%s, %s)", (table, command)).fetchall()
    return sum(int(r) for (r,) in rows)


@pytest.fixture(scope="session")
def citus_settings(settings: Settings, citus_urls: DatabaseUrls) -> Settings:
    return settings.model_copy(update={"database_url": citus_urls.owner.render_as_string(hide_password=False)})


@pytest.fixture(scope="session")
async def citus_app(
    citus_settings: Settings, citus_urls: DatabaseUrls, embedder: LocalEmbedder
) -> AsyncIterator[object]:
    application = create_app(citus_settings, urls=citus_urls, embedder=embedder)
    async with running(application):
        yield application


@pytest.fixture(scope="session")
def citus_api(citus_app: object) -> NamespaceAPI:
    return citus_app.state.api  # type: ignore[attr-defined]


@pytest.fixture
async def citus_client(citus_app: object) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=citus_app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test") as c:
        yield c


@pytest.fixture
async def citus_a(citus_api: NamespaceAPI) -> Tenant:
    return await make_tenant(citus_api, "a")


@pytest.fixture
async def citus_b(citus_api: NamespaceAPI) -> Tenant:
    return await make_tenant(citus_api, "b")


@pytest.fixture(scope="session")
async def citus_inproc_app(
    citus_settings: Settings, citus_urls: DatabaseUrls, embedder: LocalEmbedder
) -> AsyncIterator[object]:
    """The cluster's app as `memvault serve` runs it without Redis: jobs on threads in the process
    (as tests/jobs/conftest.py's inproc_app), no start-up recovery, no sweep."""
    settings = citus_settings.model_copy(
        update={"redis_url": None, "job_recover_on_start": False, "job_sweep_interval_s": 0}
    )
    application = create_app(settings, urls=citus_urls, embedder=embedder)
    async with running(application):
        yield application


@pytest.fixture
async def citus_inproc(citus_inproc_app: object) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=citus_inproc_app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test") as c:
        yield c
