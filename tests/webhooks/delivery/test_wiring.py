"""Where the sender runs: inside the app without Redis; beside `memvault worker` with Redis, where
a Redis restart loses no delivery (the outbox is in PostgreSQL, not on a queue)."""

from __future__ import annotations

import asyncio
import functools
import signal
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memvault.app import create_app
from memvault.config import Settings
from memvault.db.session import Database
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from memvault.jobs.runner import webhooks_sent_beside
from memvault.webhooks.delivery import repository
from tests.conftest import Tenant, running
from tests.db.conftest import conninfo
from tests.faults.conftest import RedisServer, fault_db, own_redis, processes  # noqa: F401 - fixtures
from tests.jobs.helpers import Worker
from tests.webhooks.delivery.conftest import (
    Receiver,
    add_deliveries,
    add_endpoint,
    delivery,
    new_secret,
    receiving,
    until,
)

Conn = psycopg.AsyncConnection[Any]


async def _count(receiver: Receiver, n: int) -> bool:
    return len(receiver.received) >= n


class TestInProcess:
    async def test_serve_without_redis_sends_and_a_notify_wakes_it(
        self, owner: Conn, tenant_a: Tenant, settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder
    ) -> None:
        # A long interval: only the commit's NOTIFY can make the delivery arrive this soon.
        local = settings.model_copy(
            update={"redis_url": None, "webhook_allow_private": True, "webhook_sweep_interval_s": 30}
        )
        receiver = Receiver(new_secret())
        async with receiving(receiver) as base, running(create_app(local, urls=pg_urls, embedder=embedder)) as app:
            assert app.state.webhook_runner is not None
            ep = await add_endpoint(owner, tenant_a.id, base, receiver.secret)
            await asyncio.sleep(0.3)  # the first sweep has run and the runner listens
            db = Database(pg_urls, pool_size=1)
            try:
                async with db.tenant_tx(tenant_a.id) as tx:
                    await repository.notify(tx.session)
                    await add_deliveries(owner, tenant_a.id, ep)  # committed before the NOTIFY is
            finally:
                await db.dispose()
            await until(lambda: _count(receiver, 1), timeout_s=5)


class TestBesideTheWorker:
    async def test_a_worker_loop_that_fails_still_lets_the_attempt_in_flight_end(
        self, owner: Conn, tenant_a: Tenant, settings: Settings, pg_urls: DatabaseUrls
    ) -> None:
        """The RQ loop of `memvault worker` raising (not a stop request) while a receiver answers:
        the sender is stopped and waited for as on SIGTERM, so the attempt is recorded, not cut off
        with the process and sent again after its lease."""
        local = settings.model_copy(update={"webhook_allow_private": True, "webhook_sweep_interval_s": 0.2})
        receiver = Receiver(new_secret(), delay_s=2.0)
        async with receiving(receiver) as base:
            ep = await add_endpoint(owner, tenant_a.id, base, receiver.secret)
            [message_id] = await add_deliveries(owner, tenant_a.id, ep)

            def worker_loop_fails_mid_attempt() -> None:
                with webhooks_sent_beside(local, pg_urls, threading.Event()):
                    deadline = time.monotonic() + 60
                    while not receiver.requests and time.monotonic() < deadline:
                        time.sleep(0.05)
                    assert receiver.requests, "the sender never called the receiver"
                    raise RuntimeError("the RQ loop failed")

            with pytest.raises(RuntimeError, match="the RQ loop failed"):
                await asyncio.to_thread(worker_loop_fails_mid_attempt)
            row = await delivery(owner, message_id)
        assert (row["status"], row["attempts"], row["response_status"]) == ("succeeded", 1, 200)


@dataclass
class Sending:
    owner: Conn
    tenant_id: uuid.UUID
    endpoint_id: uuid.UUID
    worker: Worker


@asynccontextmanager
async def worker_sending(
    db_urls: DatabaseUrls,
    redis: RedisServer,
    settings: Settings,
    tmp_path: Path,
    started: list[Worker],
    receiver: Receiver,
) -> AsyncIterator[Sending]:
    """A `memvault worker` sending webhooks (every 0.2 s) to ``receiver``, on a database and Redis
    of the test's own, and a tenant whose endpoint is the receiver."""
    local = settings.model_copy(update={"database_url": db_urls.owner.render_as_string(hide_password=False)})
    env = {"MEMVAULT_WEBHOOK_ALLOW_PRIVATE": "true", "MEMVAULT_WEBHOOK_SWEEP_INTERVAL_S": "0.2"}
    async with (
        receiving(receiver) as base,
        await psycopg.AsyncConnection.connect(conninfo(db_urls.owner), autocommit=True) as owner,
    ):
        cur = await owner.execute(
            "INSERT INTO tenants (name) VALUES (%s) RETURNING id", (f"wh-{uuid.uuid4().hex[:8]}",)
        )
        [(tenant_id,)] = await cur.fetchall()
        ep = await add_endpoint(owner, tenant_id, base, receiver.secret)
        worker = Worker(local, redis.url, tmp_path / "worker.log", recover=False, env=env)
        started.append(worker)
        yield Sending(owner, tenant_id, ep, worker)


StartWorker = Callable[[Receiver], AbstractAsyncContextManager[Sending]]


@pytest.fixture
def start_worker(
    fault_db: DatabaseUrls,  # noqa: F811
    own_redis: RedisServer,  # noqa: F811
    settings: Settings,
    tmp_path: Path,
    processes: list[Worker],  # noqa: F811
) -> StartWorker:
    return functools.partial(worker_sending, fault_db, own_redis, settings, tmp_path, processes)


class TestWorker:
    async def test_the_worker_keeps_sending_across_a_redis_restart(
        self,
        start_worker: StartWorker,
        own_redis: RedisServer,  # noqa: F811
        tmp_path: Path,
    ) -> None:
        receiver = Receiver(new_secret())
        async with start_worker(receiver) as w:
            await add_deliveries(w.owner, w.tenant_id, w.endpoint_id, 5)
            await until(lambda: _count(receiver, 5), timeout_s=120)
            own_redis.kill()
            await add_deliveries(w.owner, w.tenant_id, w.endpoint_id, 5)  # committed while Redis is down
            await until(lambda: _count(receiver, 10), timeout_s=30)
            own_redis.start()
            await add_deliveries(w.owner, w.tenant_id, w.endpoint_id, 5)
            await until(lambda: _count(receiver, 15), timeout_s=30)
        assert w.worker.proc.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
        assert len({p["id"] for p in receiver.received}) == 15

    async def test_a_worker_stopped_mid_attempt_lets_it_end_and_records_it(
        self, start_worker: StartWorker, tmp_path: Path
    ) -> None:
        """SIGTERM (a deploy) while a receiver answers: the worker waits for the answer and writes
        it down before it exits, instead of the receiver getting the message again after the lease."""
        receiver = Receiver(new_secret(), delay_s=2.0)
        async with start_worker(receiver) as w:
            [message_id] = await add_deliveries(w.owner, w.tenant_id, w.endpoint_id)
            await until(lambda: _requests(receiver, 1), timeout_s=120)  # the receiver is answering
            w.worker.proc.send_signal(signal.SIGTERM)
            await asyncio.to_thread(w.worker.proc.wait, 60)
            row = await delivery(w.owner, message_id)
        assert (row["status"], row["attempts"], row["response_status"]) == ("succeeded", 1, 200), (
            tmp_path / "worker.log"
        ).read_text()[-3000:]


async def _requests(receiver: Receiver, n: int) -> bool:
    return len(receiver.requests) >= n
