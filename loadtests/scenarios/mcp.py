"""The remote MCP door (Streamable HTTP, JSON-RPC over POST /mcp) as MCP clients speak it: the
bytes and headers of the official `mcp` client, captured from its traffic. A session opens with
`initialize`, the `notifications/initialized` notification (202) and one `tools/list`; then
`tools/call`s carry `MCP-Protocol-Version` (the negotiated version) and, when the server gave one,
`Mcp-Session-Id`. An agent opens a new session every conversation (``CALLS_PER_SESSION`` calls)."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import gevent
from locust import FastHttpUser, task
from locust.contrib.fasthttp import FastHttpSession

from scenarios.config import Identity, backoff_s, identity, tour
from scenarios.rest import wait
from scenarios.texts import Queries

PROTOCOL_VERSION = "2025-11-25"
CALLS_PER_SESSION = 20


def _message(r: Any) -> dict[str, Any]:
    """The JSON-RPC message of a response: JSON, or (servers that stream) the SSE event carrying it."""
    text = r.text or ""
    if "text/event-stream" in (r.headers.get("content-type") or ""):
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        text = next((d for d in reversed(data) if d), "{}")
    return dict(json.loads(text))


class McpClient:
    def __init__(self, client: FastHttpSession, who: Identity, label: str = "MCP") -> None:
        self.client = client
        self.who = who
        self.label = label
        self.ids = itertools.count(1)
        self.session_id: str | None = None
        self.version: str | None = None
        self.calls = 0

    def _headers(self) -> dict[str, str]:
        headers = {
            **self.who.headers,
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if self.version:
            headers["MCP-Protocol-Version"] = self.version
        return headers

    def _rpc(self, method: str, params: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self.ids), "method": method}
        if params is not None:
            body["params"] = params
        pause = 0.0
        out: dict[str, Any] | None = None
        with self.client.post(
            "/mcp", data=json.dumps(body), headers=self._headers(), name=f"{self.label} {name}", catch_response=True
        ) as r:
            if r.status_code != 200:
                r.failure(f"{r.status_code}: {(r.text or '')[:200]}")
                if r.status_code == 404:  # a stateful server forgot the session: start another
                    self.version = self.session_id = None
                pause = backoff_s(r.status_code, r.headers)
            else:
                out = self._result(r, method)
        gevent.sleep(pause)  # outside the request: a refusal's wait is not its response time
        return out

    def _result(self, r: Any, method: str) -> dict[str, Any] | None:
        try:
            msg = _message(r)
        except ValueError:
            r.failure("not JSON-RPC")
            return None
        result = msg.get("result")
        if "error" in msg or result is None:
            r.failure(str(msg.get("error"))[:200])
            return None
        if method == "tools/call" and result.get("isError"):
            r.failure(str(result.get("content"))[:200])
            return None
        if method == "initialize":
            self.session_id = r.headers.get("mcp-session-id")
        return dict(result)

    def open(self) -> bool:
        self.version = self.session_id = None
        self.calls = 0
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "memvault-loadtest", "version": "1.0"},
        }
        result = self._rpc("initialize", params, "initialize")
        if result is None:
            return False
        self.version = result.get("protocolVersion", PROTOCOL_VERSION)
        with self.client.post(
            "/mcp",
            data=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            headers=self._headers(),
            name=f"{self.label} notifications/initialized",
            catch_response=True,
        ) as r:
            if r.status_code not in (200, 202):
                r.failure(f"{r.status_code}: {(r.text or '')[:200]}")
        return self._rpc("tools/list", None, "tools/list") is not None

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        if (self.version is None or self.calls >= CALLS_PER_SESSION) and not self.open():
            return None
        self.calls += 1
        return self._rpc("tools/call", {"name": tool, "arguments": arguments}, tool)


class McpOps:
    """The three tools an agent calls most, with the same texts as the REST agent's."""

    def __init__(self, client: FastHttpSession, who: Identity, label: str = "MCP") -> None:
        self.mcp = McpClient(client, who, label)
        self.who = who
        self.queries = Queries()

    def search(self) -> None:
        self.mcp.call("memory_search", {"query": self.queries.new(), "limit": 10, "namespace": self.who.namespace})

    def context(self) -> None:
        args = {"query": self.queries.new(), "user_id": self.who.user_id, "namespace": self.who.namespace}
        self.mcp.call("memory_get_context", args)

    def store(self) -> None:
        turn = self.queries.sentence()
        args = {
            "content": f"{turn.speaker}: {turn.text}",
            "type": random.choice(["fact", "preference", "event"]),
            "user_id": self.who.user_id,
            "session_id": self.who.session_id,
            "namespace": self.who.namespace,
        }
        self.mcp.call("memory_store", args)


class McpAgent(FastHttpUser):
    """An agent in an MCP client (Claude, Cursor ...): recall at the start, search, store."""

    wait_time = wait

    def on_start(self) -> None:
        self.ops = McpOps(self.client, identity())
        tour(self)

    @task(5)
    def search(self) -> None:
        self.ops.search()

    @task(2)
    def recall_context(self) -> None:
        self.ops.context()

    @task(2)
    def store(self) -> None:
        self.ops.store()
