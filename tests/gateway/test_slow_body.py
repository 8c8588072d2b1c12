"""A body trickled in (slowloris) over real HTTP: uvicorn on 127.0.0.1 and a raw socket that sends the
headers with a large Content-Length, then a few bytes now and then."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from tests.conftest import Tenant, running
from tests.servers import served

# Trickles bodies over real sockets and waits out the server's read timeouts.
pytestmark = pytest.mark.slow

TIMEOUT_S = 1.5


@pytest.fixture
async def base(settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder) -> AsyncIterator[str]:
    own = settings.model_copy(update={"body_read_timeout_s": TIMEOUT_S, "body_min_rate": 2000})
    async with running(create_app(own, urls=pg_urls, embedder=embedder)) as app, served(app) as url:
        yield url


async def open_upload(base: str, path: str, key: str, length: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        (
            f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    return reader, writer


async def trickle(writer: asyncio.StreamWriter, data: bytes, every_s: float) -> None:
    for i in range(len(data)):
        writer.write(data[i : i + 1])
        await writer.drain()
        await asyncio.sleep(every_s)


def parse(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


class TestSlowBody:
    async def test_a_trickled_body_gets_408_and_the_connection_closes(self, base: str, tenant_a: Tenant) -> None:
        path = f"/v1/namespaces/{tenant_a.namespace}/memories"
        reader, writer = await open_upload(base, path, tenant_a.key, length=900_000)
        # Ten bytes over about a second, then silence until the deadline: a byte landing on the
        # socket after the server has answered and closed draws a reset, which discards the answer
        # not yet read (CI, 2026-12-06: ConnectionResetError with the trickle still going).
        sending = asyncio.create_task(trickle(writer, b'{"content"', every_s=0.1))
        started = time.perf_counter()

        try:
            raw = await asyncio.wait_for(reader.read(), timeout=TIMEOUT_S + 5)  # read() ends when the server closes
        finally:
            sending.cancel()
            writer.close()
        waited = time.perf_counter() - started

        status, headers, body = parse(raw)
        assert status == 408
        assert headers["connection"] == "close"
        assert headers["content-type"] == "application/problem+json"
        problem = json.loads(body)
        assert problem["code"] == "request_timeout" and problem["status"] == 408 and problem["request_id"]
        # 1.5 s, plus 1 s per 2,000 bytes received: the trickle earns a few milliseconds.
        assert TIMEOUT_S <= waited < TIMEOUT_S + 1.5

    async def test_other_clients_are_served_while_bodies_trickle(self, base: str, tenant_a: Tenant) -> None:
        path = f"/v1/namespaces/{tenant_a.namespace}/memories"
        slow = [await open_upload(base, path, tenant_a.key, length=900_000) for _ in range(8)]
        # 20 bytes over about a second, then silence until the deadline: a byte landing on the socket
        # after the server has answered and closed draws a reset, which discards an answer not yet read
        # (seen on a loaded machine even with the answers read as they come).
        trickles = [asyncio.create_task(trickle(w, b'{"content": "abcdefg', every_s=0.05)) for _, w in slow]
        reading = [asyncio.create_task(r.read()) for r, _ in slow]
        try:
            async with httpx.AsyncClient(base_url=base, headers=tenant_a.headers, timeout=5) as client:
                started = time.perf_counter()
                stored = await client.post(path, json={"content": "Ana prefers window seats"})
                listed = await client.get(path)
                served_in = time.perf_counter() - started
            answers = await asyncio.wait_for(asyncio.gather(*reading), timeout=TIMEOUT_S + 5)
        finally:
            for t in [*trickles, *reading]:
                t.cancel()
            for _, w in slow:
                w.close()

        assert stored.status_code == 201 and listed.status_code == 200
        assert served_in < TIMEOUT_S  # not after the slow uploads were cut off
        assert [parse(a)[0] for a in answers] == [408] * 8

    async def test_a_slow_upload_that_keeps_moving_is_not_cut_off(self, base: str, tenant_a: Tenant) -> None:
        """It takes longer than the timeout, but every 2,000 bytes received earn it a second more."""
        body = json.dumps({"content": "Ana prefers window seats", "metadata": {"pad": "x" * 2990}}).encode()
        path = f"/v1/namespaces/{tenant_a.namespace}/memories"
        reader, writer = await open_upload(base, path, tenant_a.key, len(body))
        try:
            for i in range(0, len(body), 1000):  # ~3,000 bytes over ~2 s: 1,500 bytes/s
                writer.write(body[i : i + 1000])
                await writer.drain()
                await asyncio.sleep(0.6)
            raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
        finally:
            writer.close()

        assert parse(raw)[0] == 201

    async def test_an_answer_before_the_body_is_read_closes_the_connection(self, base: str) -> None:
        """An answer given without reading the body (405 here) while the body still trickles:
        without a close, the server would go on reading the trickle after it, with no deadline."""
        reader, writer = await open_upload(base, "/healthz", "mv_not_a_key", length=900_000)
        sending = asyncio.create_task(trickle(writer, b"{" * 1000, every_s=0.1))
        try:
            raw = await asyncio.wait_for(reader.read(), timeout=TIMEOUT_S + 5)
        finally:
            sending.cancel()
            writer.close()

        status, headers, _ = parse(raw)
        assert status == 405 and headers["connection"] == "close"
