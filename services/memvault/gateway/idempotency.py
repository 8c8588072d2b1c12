"""The Idempotency-Key header on write routes.

A route opts in with ``dependencies=[IDEMPOTENT]``. With the header, the dependency claims the key
before the route runs (or answers at once with the stored response, `Idempotent-Replayed: true`),
and IdempotencyMiddleware stores the route's 2xx response under the key before sending it; any
other outcome releases the key so that a retry runs the request again. Without the header nothing
changes. ``dependencies=[NOT_IDEMPOTENT]`` refuses the header where a replay could not honestly
answer (a created API key's secret is never stored).
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, FastAPI, Request
from fastapi.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memvault.api import NamespaceAPI
from memvault.errors import InvalidInput
from memvault.gateway.deps import current_principal, get_api
from memvault.idempotency.service import StoredResponse
from memvault.principal import Principal

log = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
_STATE = "idempotency_claim"
# Printable ASCII, like the UUIDs and ULIDs clients use; header values arrive trimmed.
_VALID_KEY = re.compile(r"^[\x20-\x7e]{1,255}$")
# Response headers a replay repeats (e.g. the job URL of an ingest).
_KEPT_HEADERS = ("content-type", "location")


class InvalidIdempotencyKey(InvalidInput):
    code = "invalid_idempotency_key"
    title = "Invalid Idempotency-Key"


class IdempotencyNotSupported(InvalidInput):
    code = "idempotency_not_supported"
    title = "Idempotency-Key not supported here"


@dataclass
class _Claim:
    api: NamespaceAPI
    principal: Principal
    key: str

    async def complete(self, response: StoredResponse) -> None:
        await self.api.complete_idempotency_key(self.principal, self.key, response)

    async def release(self) -> None:
        await self.api.release_idempotency_key(self.principal, self.key)


class _Replay(Exception):
    def __init__(self, stored: StoredResponse) -> None:
        self.stored = stored


def _key(request: Request) -> str | None:
    key = request.headers.get(HEADER)
    if key is None:
        return None
    if not _VALID_KEY.match(key):
        raise InvalidIdempotencyKey(
            "Idempotency-Key must be 1 to 255 printable ASCII characters.", extra={"field": HEADER}
        )
    return key


def request_hash(method: str, path: str, body: bytes) -> str:
    h = hashlib.sha256()
    for part in (method.encode(), path.encode(), body):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()


async def _idempotent(
    request: Request,
    api: Annotated[NamespaceAPI, Depends(get_api)],
    p: Annotated[Principal, Depends(current_principal)],
) -> None:
    key = _key(request)
    if key is None:
        return
    # The query is part of the request (`?upsert=true` changes what a create does).
    path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    digest = request_hash(request.method, path, await request.body())
    stored = await api.claim_idempotency_key(p, key, method=request.method, path=path, request_hash=digest)
    if stored is not None:
        raise _Replay(stored)
    setattr(request.state, _STATE, _Claim(api, p, key))


def _refuse(request: Request) -> None:
    if _key(request) is not None:
        raise IdempotencyNotSupported(
            "This route does not take an Idempotency-Key: its response holds a secret that is shown once "
            "and never stored, so a retry could not be answered with it.",
            extra={"field": HEADER},
        )


IDEMPOTENT = Depends(_idempotent)
NOT_IDEMPOTENT = Depends(_refuse)


class IdempotencyMiddleware:
    """Completes or releases the claim a route's request made, once its response is known and
    before it is sent, so a retry can never see the write without its stored answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] == "GET":
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        chunks: list[bytes] = []
        claim: _Claim | None = None

        async def buffering_send(message: Message) -> None:
            nonlocal start, claim
            if message["type"] == "http.response.start":
                claim = scope.get("state", {}).get(_STATE)
                if claim is None:
                    await send(message)
                else:
                    start = message
                return
            if claim is None or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            assert start is not None
            await _settle(claim, start, b"".join(chunks))
            await send(start)
            await send({"type": "http.response.body", "body": b"".join(chunks)})

        try:
            await self.app(scope, receive, buffering_send)
        except BaseException:
            pending = scope.get("state", {}).get(_STATE)
            if pending is not None and start is None:
                await _quietly(pending.release())
            raise
        pending = scope.get("state", {}).get(_STATE)
        if pending is not None and start is None:
            # The route claimed the key but no response went out through us: never leave it in flight.
            await _quietly(pending.release())


async def _settle(claim: _Claim, start: Message, body: bytes) -> None:
    status: int = start["status"]
    if not 200 <= status < 300:
        await _quietly(claim.release())
        return
    headers = {
        k.decode("latin-1").lower(): v.decode("latin-1")
        for k, v in start.get("headers", [])
        if k.decode("latin-1").lower() in _KEPT_HEADERS
    }
    stored = StoredResponse(status=status, body=body.decode("utf-8") if body else None, headers=headers)
    try:
        await claim.complete(stored)
    except Exception:
        # The write committed; only its stored answer is missing. Retries get 409 until the key expires.
        log.exception("could not store the response of idempotency key %r", claim.key)


async def _quietly(aw: object) -> None:
    try:
        await aw  # type: ignore[misc]
    except Exception:
        log.exception("could not release an idempotency key")


def _replay(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, _Replay)
    stored = exc.stored
    headers = {k: v for k, v in stored.headers.items() if k != "content-type"}
    headers[REPLAYED] = "true"
    return Response(
        content=stored.body or b"",
        status_code=stored.status,
        headers=headers,
        media_type=stored.headers.get("content-type"),
    )


def install(app: FastAPI) -> None:
    app.add_exception_handler(_Replay, _replay)
    app.add_middleware(IdempotencyMiddleware)
