"""Apps served by real uvicorn on loopback, for tests about HTTP itself (keep-alive, slow bodies,
MCP clients, the SDK, schemathesis)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import uvicorn


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def served(app: Any, port: int | None = None) -> AsyncIterator[str]:
    """`app` (its lifespan already running, see tests.conftest.running) on this event loop; yields
    its base URL."""
    port = port or free_port()
    # A connection still open at the end (a client that never finished) must not hold the test:
    # uvicorn waits for open connections without end unless given a graceful-shutdown bound.
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, lifespan="off", log_level="warning", timeout_graceful_shutdown=10
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 - uvicorn offers a flag, not an event
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # the test runner owns the signals
        pass


@contextmanager
def served_on_thread(app: Any, port: int = 0) -> Iterator[str]:
    """`app` with its own lifespan, on a thread and event loop of its own: for clients that block
    (the sync SDK, schemathesis, a browser), which the test loop could not answer. Yields its base
    URL. ``port``: one chosen beforehand (an app whose public URL must name it); 0: any free one."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    server = _Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
