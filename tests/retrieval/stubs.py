"""What the second-stage tests share: a provider stub on 127.0.0.1 (the providers are outside this
machine, so they are the only stubs), and a second app over the shared database configured for it."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import psycopg

from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from tests.conftest import running
from tests.db.conftest import conninfo

# Longer than the timeout the stub's apps are given (TIMEOUT_S), so a slow answer always misses it.
SLOW_S = 1.5
TIMEOUT_S = 0.5


class Stub:
    """A JSON server answering ``POST {path}``: ``good`` answers ``answer(request body)``,
    ``malformed`` answers ``malformed`` with status 200, ``error`` a 500, ``slow`` the good
    answer after SLOW_S. ``on_answer``, when set, is called as each good answer is made."""

    def __init__(self, path: str, answer: Callable[[dict[str, Any]], Any], malformed: Any) -> None:
        self.mode = "good"
        self.on_answer: Callable[[], None] | None = None
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(body)
                stub.headers.append(dict(self.headers))
                if self.path != path:
                    return self._send(404, {"error": {"message": "not found"}})
                if stub.mode == "error":
                    return self._send(500, {"error": {"message": "overloaded"}})
                if stub.mode == "malformed":
                    return self._send(200, malformed)
                if stub.mode == "slow":
                    time.sleep(SLOW_S)
                if stub.on_answer is not None:
                    stub.on_answer()
                self._send(200, answer(body))

            def _send(self, status: int, payload: Any) -> None:
                raw = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                # A slow answer's client has given up and closed the connection.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def waiting_search_transactions(urls: DatabaseUrls) -> list[str]:
    """The last statement of each transaction that is open but idle and was opened by a search
    (its settings, preamble, word counts or statement): what a remote stage must not keep waiting."""
    with psycopg.connect(conninfo(urls.owner)) as conn:
        rows = conn.execute(
            "SELECT query FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' "
            "AND (query LIKE 'SET LOCAL %' OR query LIKE '%to_tsvector%' "
            "OR query LIKE '%memvault_word_%' OR query LIKE '%memvault_nearest%') "
            # The access counts' writer (memories/access.py) opens its own, with synchronous_commit
            # off, on its own schedule: not a search's (CI, 2026-12-06).
            "AND query NOT LIKE '%synchronous_commit%'"
        ).fetchall()
    return [r[0] for r in rows]


@asynccontextmanager
async def app_client(
    settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder, *, app_kwargs: Any = None, **overrides: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """A second app over the same database, with some settings changed (and, through
    ``app_kwargs``, a reranker or rewriter of the test's own)."""
    application = create_app(
        settings.model_copy(update=overrides), urls=pg_urls, embedder=embedder, **(app_kwargs or {})
    )
    async with running(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test") as c:
            yield c
