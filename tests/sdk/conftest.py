"""The SDK against the real server: the app under uvicorn on 127.0.0.1 (sharing the session's
database and model), reached directly or through FaultProxy, a small HTTP proxy on loopback that
can refuse, break or stall chosen requests the way a load balancer or a network would.

Every client test runs twice, with MemVault and with AsyncMemVault: ``call(x)`` awaits x when the
async client returned an awaitable, and ``items(x)`` walks a list of either kind to the end."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from memvault_sdk import AsyncMemVault, MemVault
from tests.conftest import Tenant
from tests.servers import served_on_thread


def _listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@pytest.fixture(scope="session")
def server_url(settings: Settings, pg_urls: DatabaseUrls) -> Iterator[str]:
    # An embedder of its own: the session's holds an asyncio lock bound to the session's loop, and
    # this server runs on another one. Without Redis the server runs jobs on its own threads, so
    # `jobs.wait` sees them finish.
    embedder = LocalEmbedder("sentence-transformers/all-MiniLM-L6-v2", dim=384)
    app = create_app(settings.model_copy(update={"redis_url": None}), urls=pg_urls, embedder=embedder)
    with served_on_thread(app) as url:
        yield url


# ---- the fault-injecting proxy -------------------------------------------------------------


@dataclass
class Fault:
    """What to do with the next ``times`` requests whose method and path match.

    reject: answer ``status`` without forwarding (the request never reaches the app).
    after: forward, let the app answer, then answer ``status`` instead (the write happened).
    drop: forward, let the app answer, then close the connection without a response.
    stall: hold the request and never answer.
    """

    mode: str
    method: str
    path: str
    status: int = 503
    headers: dict[str, str] = field(default_factory=dict)
    times: int = 1

    def matches(self, method: str, path: str) -> bool:
        return self.times > 0 and method == self.method and re.fullmatch(self.path, path) is not None


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    fault: str | None


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self._upstream = (host, int(port))
        self.faults: list[Fault] = []
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._sock = _listening_socket()
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ready = threading.Event()
        self._thread.start()
        self._ready.wait(10)

    def add(self, mode: str, method: str, path: str, **kw: Any) -> Fault:
        fault = Fault(mode, method, path, **kw)
        with self._lock:
            self.faults.append(fault)
        return fault

    def reset(self) -> None:
        with self._lock:
            self.faults.clear()
            self.seen.clear()

    def requests(self, method: str, path: str) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.method == method and re.fullmatch(path, s.path)]

    def _take(self, method: str, path: str, headers: dict[str, str]) -> Fault | None:
        with self._lock:
            fault = next((f for f in self.faults if f.matches(method, path)), None)
            if fault is not None:
                fault.times -= 1
            self.seen.append(Seen(method, path, headers, fault.mode if fault else None))
            return fault

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main() -> None:
            srv = await asyncio.start_server(self._handle, sock=self._sock)
            self._ready.set()
            async with srv:
                await srv.serve_forever()

        with contextlib.suppress(asyncio.CancelledError, RuntimeError):
            self._loop.run_until_complete(main())
        # close() cancelled the connection handlers with the server: let them finish (their
        # `finally` closes their sockets) on this loop, or they would do it at garbage collection,
        # on a closed loop ("Event loop is closed").
        handlers = asyncio.all_tasks(self._loop)
        if handlers:
            self._loop.run_until_complete(asyncio.gather(*handlers, return_exceptions=True))
        self._loop.close()

    def close(self) -> None:
        for task in asyncio.all_tasks(self._loop):
            self._loop.call_soon_threadsafe(task.cancel)
        self._thread.join(timeout=10)

    @staticmethod
    async def _read_message(reader: asyncio.StreamReader) -> tuple[bytes, dict[str, str], bytes]:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size_line = await reader.readuntil(b"\r\n")
                size = int(size_line.split(b";")[0], 16)
                chunk = await reader.readexactly(size + 2)
                body += size_line + chunk
                if size == 0:
                    break
            return head, headers, body
        return head, headers, await reader.readexactly(int(headers.get("content-length", "0")))

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        try:
            while True:
                try:
                    head, headers, body = await self._read_message(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                method, target, _ = head.decode("latin-1").split("\r\n", 1)[0].split(" ", 2)
                fault = self._take(method, target.split("?")[0], headers)
                if fault is not None and fault.mode == "stall":
                    await asyncio.sleep(3600)
                if fault is not None and fault.mode == "reject":
                    writer.write(self._problem(fault))
                    await writer.drain()
                    continue
                up_writer.write(head + body)
                await up_writer.drain()
                resp_head, _, resp_body = await self._read_message(up_reader)
                if fault is not None and fault.mode == "drop":
                    writer.transport.abort()
                    return
                if fault is not None and fault.mode == "after":
                    writer.write(self._problem(fault))
                else:
                    writer.write(resp_head + resp_body)
                await writer.drain()
        finally:
            up_writer.close()
            writer.close()

    @staticmethod
    def _problem(fault: Fault) -> bytes:
        body = json.dumps(
            {
                "type": "https://memvault.dev/errors/injected",
                "title": "Injected by the test proxy",
                "status": fault.status,
                "detail": f"injected {fault.status}",
                "code": {429: "rate_limited", 503: "unavailable"}.get(fault.status, "injected"),
                "request_id": "proxy-request-id",
            }
        ).encode()
        headers = {
            "content-type": "application/problem+json",
            "content-length": str(len(body)),
            "x-request-id": "proxy-request-id",
            **fault.headers,
        }
        head = f"HTTP/1.1 {fault.status} Injected\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        return head.encode() + b"\r\n" + body


@pytest.fixture(scope="session")
def _proxy(server_url: str) -> Iterator[FaultProxy]:
    proxy = FaultProxy(server_url)
    yield proxy
    proxy.close()


@pytest.fixture
def proxy(_proxy: FaultProxy) -> Iterator[FaultProxy]:
    _proxy.reset()
    yield _proxy
    _proxy.reset()


# ---- clients ----------------------------------------------------------------------------------


async def call(value: Any) -> Any:
    """The result of a client call, sync or async."""
    return await value if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future) else value


async def first_page(value: Any) -> Any:
    """The first page of a list call: the sync client returns it, the async one is awaited."""
    return await value if hasattr(value, "__await__") else value


async def items(value: Any) -> list[Any]:
    """Every item of every page of a list call."""
    if hasattr(value, "__aiter__"):
        return [x async for x in value]
    return list(value)


@pytest.fixture(params=["sync", "async"])
async def client(request: pytest.FixtureRequest, tenant_a: Tenant, server_url: str) -> AsyncIterator[Any]:
    """tenant_a's SDK client, of each kind in turn, talking straight to the server."""
    if request.param == "sync":
        with MemVault(api_key=tenant_a.key, base_url=server_url) as c:
            yield c
    else:
        async with AsyncMemVault(api_key=tenant_a.key, base_url=server_url) as c:
            yield c


@pytest.fixture(params=["sync", "async"])
async def proxied(request: pytest.FixtureRequest, tenant_a: Tenant, proxy: FaultProxy) -> AsyncIterator[Any]:
    """tenant_a's SDK client through the fault-injecting proxy."""
    if request.param == "sync":
        with MemVault(api_key=tenant_a.key, base_url=proxy.url) as c:
            yield c
    else:
        async with AsyncMemVault(api_key=tenant_a.key, base_url=proxy.url) as c:
            yield c
