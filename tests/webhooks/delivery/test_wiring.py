"""Where the sender runs: inside the app without Redis; beside `memvault worker` with Redis, where
a Redis restart loses no delivery (the outbox is in PostgreSQL, not on a queue)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import psycopg

from memvault.app import create_app
from memvault.config import Settings
from memvault.db.session import Database
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from memvault.webhooks.delivery import repository
from tests.conftest import Tenant, running
from tests.db.conftest import conninfo
from tests.faults.conftest import RedisServer, fault_db, own_redis, processes  # noqa: F401 - fixtures
from tests.jobs.helpers import Worker
from tests.webhooks.delivery.conftest import Receiver, add_deliveries, add_endpoint, new_secret, receiving, until

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


class TestRedisRestart:
    async def test_the_worker_keeps_sending_across_a_redis_restart(
        self,
        fault_db: DatabaseUrls,  # noqa: F811
        own_redis: RedisServer,  # noqa: F811
        settings: Settings,
        tmp_path: Path,
        processes: list[Worker],  # noqa: F811
    ) -> None:
        local = settings.model_copy(update={"database_url": fault_db.owner.render_as_string(hide_password=False)})
        receiver = Receiver(new_secret())
        env = {"MEMVAULT_WEBHOOK_ALLOW_PRIVATE": "true", "MEMVAULT_WEBHOOK_SWEEP_INTERVAL_S": "0.2"}
        async with (
            receiving(receiver) as base,
            await psycopg.AsyncConnection.connect(conninfo(fault_db.owner), autocommit=True) as owner,
        ):
            name = f"wh-{uuid.uuid4().hex[:8]}"
            cur = await owner.execute("INSERT INTO tenants (name) VALUES (%s) RETURNING id", (name,))
            [(tenant_id,)] = await cur.fetchall()
            ep = await add_endpoint(owner, tenant_id, base, receiver.secret)
            worker = Worker(local, own_redis.url, tmp_path / "worker.log", recover=False, env=env)
            processes.append(worker)
            await add_deliveries(owner, tenant_id, ep, 5)
            await until(lambda: _count(receiver, 5), timeout_s=120)
            own_redis.kill()
            await add_deliveries(owner, tenant_id, ep, 5)  # committed while Redis is down
            await until(lambda: _count(receiver, 10), timeout_s=30)
            own_redis.start()
            await add_deliveries(owner, tenant_id, ep, 5)
            await until(lambda: _count(receiver, 15), timeout_s=30)
        assert worker.proc.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
        assert len({p["id"] for p in receiver.received}) == 15
