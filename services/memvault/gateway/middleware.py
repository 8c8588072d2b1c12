"""Pure ASGI middleware: request ids, and a cap on body size that holds for chunked uploads too."""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from typing import Any

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("memvault.access")

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
            await self.app(scope, receive, send_with_id)
        finally:
            log.info(
                "%s %s %s %.1fms",
                scope["method"],
                scope["path"],
                status,
                (time.perf_counter() - started) * 1000,
                extra={"request_id": rid},
            )


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
        body: dict[str, Any] = {
            "type": "https://memvault.dev/errors/payload_too_large",
            "title": "Request body too large",
            "status": 413,
            "detail": f"Request bodies are limited to {limit} bytes.",
            "code": "payload_too_large",
        }
        rid = scope.get("state", {}).get("request_id")
        if rid:
            body["request_id"] = rid
        raw = json.dumps(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/problem+json"),
                    (b"content-length", str(len(raw)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": raw})

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
