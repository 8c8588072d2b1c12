"""Pure ASGI middleware: request ids, a cap on body size that holds for chunked uploads too, and a
deadline on reading the body."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
import uuid
from typing import Any

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memvault.errors import MemvaultError, PayloadTooLarge, RequestTimeout
from memvault.metering.tally import Door, through
from memvault.observability import access, logs
from memvault.plans.gate import reporting

_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


class RequestIdMiddleware:
    """Takes a sane incoming X-Request-ID or makes one; echoes it and logs the request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope["headers"]).get(b"x-request-id", b"").decode("latin-1")
        rid = incoming if _SAFE_ID.match(incoming) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = rid
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", []).append((b"x-request-id", rid.encode()))
            await send(message)

        try:
            with logs.request_context(rid):
                await self.app(scope, receive, send_with_id)
        finally:
            access.record(scope, rid, status, time.perf_counter() - started)


class RateLimitHeadersMiddleware:
    """Tells a REST client where the limits it was counted against stand (plans/gate.py), in the
    `RateLimit-Policy` and `RateLimit` fields of draft-ietf-httpapi-ratelimit-headers: one item per
    limit, e.g. `RateLimit-Policy: "key-search";q=60;w=60` and `RateLimit: "key-search";r=12;t=30`
    (quota q per window w seconds; r remaining, t seconds until the window frees a unit). Answers
    that no limit counted (an unlimited plan, a probe) carry neither."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with reporting() as windows:

            async def send_with_limits(message: Message) -> None:
                if message["type"] == "http.response.start" and windows:
                    policy = ", ".join(f'"{w.policy}";q={w.quota};w={w.window_s}' for w in windows)
                    state = ", ".join(f'"{w.policy}";r={w.remaining};t={w.reset_s}' for w in windows)
                    headers = message.setdefault("headers", [])
                    headers += [(b"ratelimit-policy", policy.encode()), (b"ratelimit", state.encode())]
                await send(message)

            await self.app(scope, receive, send_with_limits)


class DoorMiddleware:
    """Which door a request came through, for usage metering (metering/tally.py): the dashboard's
    pages by their path, the SDK names itself in its User-Agent (``memvault-sdk/<version>``),
    anything else is REST. /mcp is left alone: its tool calls run in the MCP session's tasks, and
    the MCP runtime sets its door there."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith("/mcp"):
            await self.app(scope, receive, send)
            return
        agent = next((v for k, v in scope["headers"] if k == b"user-agent"), b"")
        door: Door = "sdk" if agent.startswith(b"memvault-sdk/") else "rest"
        if scope["path"] == "/dashboard" or scope["path"].startswith("/dashboard/"):
            door = "dashboard"
        with through(door):
            await self.app(scope, receive, send)


async def send_problem(
    scope: Scope, send: Send, exc: MemvaultError, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Answer with `exc` as problem JSON from pure ASGI code, where FastAPI's handlers do not reach
    (middleware, the mounted /mcp app): same body, request id and Retry-After as gateway/problems.py."""
    body: dict[str, Any] = exc.problem()
    rid = scope.get("state", {}).get("request_id")
    if rid:
        body["request_id"] = rid
    raw = json.dumps(body).encode()
    out = [(b"content-type", b"application/problem+json"), (b"content-length", str(len(raw)).encode())]
    out += [(k.lower().encode(), v.encode()) for k, v in exc.response_headers().items()]
    await send({"type": "http.response.start", "status": exc.status, "headers": out + (headers or [])})
    await send({"type": "http.response.body", "body": raw})


class _TooLarge(HTTPException):
    """An HTTPException, so FastAPI's body parsing re-raises it as is (it turns other errors into 400)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"Request bodies are limited to {max_bytes} bytes.")


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int, import_max_bytes: int | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        # Restoring an export is one request by design (all or nothing), so it gets its own limit.
        self.import_max_bytes = import_max_bytes or max_bytes

    def _limit(self, scope: Scope) -> int:
        path: str = scope.get("path", "")
        return self.import_max_bytes if path.endswith("/import") and scope.get("method") == "POST" else self.max_bytes

    async def _reject(self, scope: Scope, send: Send, limit: int) -> None:
        await send_problem(scope, send, PayloadTooLarge(f"Request bodies are limited to {limit} bytes."))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self._limit(scope)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._reject(scope, send, limit)
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _TooLarge(limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _TooLarge:
            if not started:
                await self._reject(scope, send, limit)


class _BodyTimedOut(HTTPException):
    """An HTTPException, so FastAPI's body parsing re-raises it as is (it turns other errors into 400)."""

    def __init__(self) -> None:
        super().__init__(408, "The request body did not arrive in time.")


# An answer sent before the body was read (a 401, a 405) keeps its connection when the rest of the
# body is already here or comes at once, as a small JSON body does: read it away. A body that is
# large or still trickling closes the connection instead, or the server would go on reading it
# after the answer with no deadline.
_DRAIN_S = 0.25
_DRAIN_BYTES = 64 * 1024


async def _drain(receive: Receive) -> bool:
    got = 0
    try:
        async with asyncio.timeout(_DRAIN_S):
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return False
                got += len(message.get("body", b""))
                if got > _DRAIN_BYTES:
                    return False
                if not message.get("more_body", False):
                    return True
    except TimeoutError:
        return False


class BodyTimeoutMiddleware:
    """A request body must arrive within ``timeout_s`` of the request's headers, plus one second
    per ``min_rate`` bytes received (Apache's mod_reqtimeout rule): a slow upload that keeps
    moving gets the time it needs, a body trickled in (slowloris: a large Content-Length, a byte
    now and then) gets ``408 request_timeout`` and the connection is closed.

    The answer is this middleware's own whatever the application makes of the error (a mounted
    app such as /mcp may answer it otherwise). Reads after the whole body (an application
    waiting for the client to disconnect) have no deadline. An answer sent before the body was
    read (a 401 before parsing it) keeps the connection only if the rest of the body is read away
    at once (`_drain`)."""

    def __init__(self, app: ASGIApp, timeout_s: float, min_rate: int) -> None:
        self.app = app
        self.timeout_s = timeout_s
        self.min_rate = min_rate

    async def _reject(self, scope: Scope, send: Send) -> None:
        exc = RequestTimeout(
            f"The request body did not arrive in time (allowed: {self.timeout_s:g} s, plus 1 s per "
            f"{self.min_rate} bytes received)."
        )
        # The rest of the body may still be on its way: close instead of reading it.
        await send_problem(scope, send, exc, [(b"connection", b"close")])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        has_body = headers.get(b"content-length", b"0") not in (b"0", b"") or b"transfer-encoding" in headers
        loop = asyncio.get_running_loop()
        started_at = loop.time()
        received = 0
        whole = timed_out = started = False

        async def timed_receive() -> Message:
            nonlocal received, whole, timed_out
            if whole or timed_out:
                return await receive()
            remaining = started_at + self.timeout_s + received / self.min_rate - loop.time()
            try:
                async with asyncio.timeout(max(remaining, 0)):
                    message = await receive()
            except TimeoutError:
                timed_out = True
                raise _BodyTimedOut() from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                whole = not message.get("more_body", False)
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if timed_out:
                if not started:
                    started = True
                    await self._reject(scope, send)
                return  # what the application answers to the error is replaced by the 408
            if message["type"] == "http.response.start":
                started = True
                if has_body and not whole and not await _drain(receive):
                    message.setdefault("headers", []).append((b"connection", b"close"))
            await send(message)

        with contextlib.suppress(_BodyTimedOut):
            await self.app(scope, timed_receive, guarded_send)
        if timed_out and not started:
            await self._reject(scope, send)
