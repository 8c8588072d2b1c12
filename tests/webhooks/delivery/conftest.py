"""A receiver on loopback, and endpoint and delivery rows written as the owner (only their columns
matter here: the subscription API is tested in tests/webhooks/)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
from standardwebhooks.webhooks import Webhook

from memvault.config import Settings
from memvault.db.session import Database
from memvault.db.urls import DatabaseUrls
from memvault.webhooks.delivery.runner import DeliveryRunner
from tests.db.conftest import conninfo
from tests.servers import served

# Answers the receiver gives, in turn; the last one repeats.
Answer = tuple[int, bytes, dict[str, str]]


@dataclass
class Receiver:
    secret: str
    answers: list[Answer] = field(default_factory=lambda: [(200, b"ok", {})])
    delay_s: float = 0.0
    received: list[dict[str, Any]] = field(default_factory=list)  # verified payloads, 2xx answered
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # (path, headers) of every call
    in_flight: int = 0
    most_in_flight: int = 0
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[Any]], send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.requests.append((scope["path"], headers))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            status, content, extra = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
            payload = Webhook(self.secret).verify(body, headers)  # raises on a bad signature
            if 200 <= status < 300:
                self.received.append({"id": headers["webhook-id"], **payload})
                self.arrived.set()
        finally:
            self.in_flight -= 1
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(k.encode(), v.encode()) for k, v in extra.items()],
            }
        )
        await send({"type": "http.response.body", "body": content})


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(24)).decode()


@asynccontextmanager
async def receiving(receiver: Receiver, port: int | None = None) -> AsyncIterator[str]:
    async with served(receiver, port) as base:
        yield base


@pytest.fixture
async def owner(pg_urls: DatabaseUrls) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with await psycopg.AsyncConnection.connect(conninfo(pg_urls.owner), autocommit=True) as conn:
        yield conn


async def add_endpoint(
    owner: psycopg.AsyncConnection[Any],
    tenant_id: uuid.UUID,
    url: str,
    secret: str,
    *,
    previous: str | None = None,
    events: tuple[str, ...] = ("memory.created",),
) -> uuid.UUID:
    cur = await owner.execute(
        "INSERT INTO webhook_endpoints (tenant_id, url, events, secret, previous_secret, previous_secret_expires_at, "
        "created_by) VALUES (%s, %s, %s, %s, %s, now() + interval '1 day', 'test') RETURNING id",
        (tenant_id, url, list(events), secret, previous),
    )
    row = await cur.fetchone()
    assert row is not None
    return uuid.UUID(str(row[0]))


async def add_deliveries(
    owner: psycopg.AsyncConnection[Any], tenant_id: uuid.UUID, endpoint_id: uuid.UUID, n: int = 1
) -> list[str]:
    """``n`` pending deliveries due now; their message ids."""
    cur = await owner.execute(
        "INSERT INTO webhook_deliveries (tenant_id, endpoint_id, message_id, event_type, payload) "
        "SELECT %s, %s, 'msg_' || replace(gen_random_uuid()::text, '-', ''), 'memory.created', "
        "jsonb_build_object('type', 'memory.created', 'timestamp', now()::text, "
        "'data', jsonb_build_object('n', i, 'text', 'café ✓')) "
        "FROM generate_series(1, %s) i RETURNING message_id",
        (tenant_id, endpoint_id, n),
    )
    return [r[0] for r in await cur.fetchall()]


async def delivery(owner: psycopg.AsyncConnection[Any], message_id: str) -> dict[str, Any]:
    cur = await owner.execute(
        "SELECT status, attempts, response_status, response_excerpt, error, latency_ms "
        "FROM webhook_deliveries WHERE message_id = %s",
        (message_id,),
    )
    row = await cur.fetchone()
    assert row is not None
    keys = ("status", "attempts", "response_status", "response_excerpt", "error", "latency_ms")
    return dict(zip(keys, row, strict=True))


async def endpoint(owner: psycopg.AsyncConnection[Any], endpoint_id: uuid.UUID) -> dict[str, Any]:
    cur = await owner.execute(
        "SELECT enabled, disabled_reason, failing_since FROM webhook_endpoints WHERE id = %s", (endpoint_id,)
    )
    row = await cur.fetchone()
    assert row is not None
    return {"enabled": row[0], "disabled_reason": row[1], "failing_since": row[2]}


@pytest.fixture
def sender_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"webhook_allow_private": True, "webhook_sweep_interval_s": 0.05})


@asynccontextmanager
async def sending(
    pg_urls: DatabaseUrls, settings: Settings, *, backoff: tuple[float, ...] = (0.05,) * 6
) -> AsyncIterator[DeliveryRunner]:
    db = Database(pg_urls, pool_size=4)
    runner = DeliveryRunner(db, settings, backoff=backoff)
    task = asyncio.create_task(runner.run())
    try:
        yield runner
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await db.dispose()


async def until(check: Callable[[], Awaitable[bool]], timeout_s: float = 15.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not await check():  # noqa: ASYNC110 - the conditions are rows in PostgreSQL, not events
            await asyncio.sleep(0.05)


def payloads(receiver: Receiver) -> list[str]:
    return [json.dumps(p, sort_keys=True) for p in receiver.received]
