"""The fault-injection suite's parts: a Redis server of our own to kill and start again (never the
shared one on 6379), a database of our own on the session's PostgreSQL (a sweeping worker there
would otherwise run every job other tests leave queued on purpose), and the gateway on both."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import redis
from sqlalchemy import create_engine, pool, text
from sqlalchemy.engine import make_url

from memvault.api import NamespaceAPI
from memvault.app import create_app
from memvault.config import Settings
from memvault.db import migrate
from memvault.db.urls import DatabaseUrls, resolve
from memvault.embeddings.local import LocalEmbedder
from tests.conftest import running
from tests.jobs.helpers import Worker
from tests.servers import free_port


class RedisServer:
    """`redis-server` on a free loopback port, in a folder of its own, without persistence: killed
    and started again, it comes back empty, as a Redis restarted without a disk does."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed: infra/scripts/test.sh installs it")
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        with (self.folder / "redis.log").open("ab") as log:
            self.proc = subprocess.Popen([binary, *args, "--dir", str(self.folder)], stdout=log, stderr=log)
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert self.proc.poll() is None, (self.folder / "redis.log").read_text()
                assert time.monotonic() < deadline, "redis-server did not answer within 10 s"
                time.sleep(0.05)
        client.close()

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    folder = Path(tempfile.mkdtemp(prefix="memvault-faults-redis-"))
    server = RedisServer(folder)
    server.start()
    yield server
    if server.proc is not None and server.proc.poll() is None:
        server.kill()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def fault_db(pg_uri: str) -> DatabaseUrls:
    """A database of the fault suite's own on the session's PostgreSQL, migrated."""
    name = f"faults_{uuid.uuid4().hex[:8]}"
    admin = create_engine(make_url(pg_uri).set(drivername="postgresql+psycopg"), poolclass=pool.NullPool)
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    uri = make_url(pg_uri).set(database=name).render_as_string(hide_password=False)
    urls = resolve(uri, None, "memvault_app", embedded=True)
    migrate.upgrade(urls.owner, "memvault_app", allow_login=True)
    return urls


@pytest.fixture
def fault_settings(settings: Settings, fault_db: DatabaseUrls, own_redis: RedisServer) -> Settings:
    return settings.model_copy(
        update={"database_url": fault_db.owner.render_as_string(hide_password=False), "redis_url": own_redis.url}
    )


@pytest.fixture
async def gateway(
    fault_settings: Settings, fault_db: DatabaseUrls, embedder: LocalEmbedder
) -> AsyncIterator[tuple[httpx.AsyncClient, NamespaceAPI]]:
    """The app on the fault suite's database and Redis, and a client of it."""
    async with running(create_app(fault_settings, urls=fault_db, embedder=embedder)) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test") as client:
            yield client, app.state.api


@pytest.fixture
def processes() -> Iterator[list[Worker]]:
    """`memvault` processes a test starts; stopped with SIGTERM (then SIGKILL) when it ends."""
    started: list[Worker] = []
    yield started
    for w in started:
        w.stop()
