"""Signing and posting one delivery (Standard Webhooks), and what its answer means.

The body is the delivery's payload serialised once, compactly, and signed as sent: the
``webhook-signature`` header carries one ``v1,<base64>`` per secret that signs (the current one,
and during a rotation the previous one too, space separated as the scheme allows). The request
follows no redirect (a 3xx is a failure: a redirect could point at an internal address the guard
never saw), and at most ``EXCERPT_BYTES`` of the answer are read, streamed, and kept for the log.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import httpcore
import httpx
from standardwebhooks.webhooks import Webhook

from memvault.webhooks.delivery.addresses import AddressRefused, GuardedBackend, check_url

EXCERPT_BYTES = 1024
USER_AGENT = "memvault-webhooks/1"

Outcome = Literal["succeeded", "gone", "failed"]


@dataclass(frozen=True)
class Message:
    """What one attempt sends: the delivery's id and body and the secrets that sign it."""

    message_id: str
    payload: dict[str, Any]
    url: str
    secrets: tuple[str, ...]


@dataclass(frozen=True)
class Result:
    outcome: Outcome
    status: int | None = None
    excerpt: str | None = None
    latency_ms: int | None = None
    error: str | None = None


def body_of(payload: dict[str, Any]) -> str:
    """The bytes on the wire, as the interface between outbox and sender fixes them."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def sign(message_id: str, timestamp: datetime, body: str, secrets: tuple[str, ...]) -> str:
    """The ``webhook-signature`` header: every secret's signature, space separated."""
    return " ".join(Webhook(secret).sign(message_id, timestamp, body) for secret in secrets)


def headers_for(message: Message, body: str, now: datetime | None = None) -> dict[str, str]:
    now = now or datetime.now(UTC)
    return {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        # The excerpt is the raw bytes read: uncompressed, so that it is readable and 1 KiB read is
        # 1 KiB kept (a compressed answer could also expand without bound).
        "accept-encoding": "identity",
        "webhook-id": message.message_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": sign(message.message_id, now, body, message.secrets),
    }


def outcome_of(status: int) -> Outcome:
    """2xx: received. 410: the receiver asks us to stop, so the endpoint is disabled at once.
    Anything else (3xx included, as redirects are not followed) is retried."""
    if 200 <= status < 300:
        return "succeeded"
    if status == 410:
        return "gone"
    return "failed"


async def _excerpt(response: httpx.Response) -> str:
    """At most EXCERPT_BYTES of the body, read as a stream and left there: a receiver answering
    with gigabytes costs us one chunk."""
    kept = bytearray()
    async for chunk in response.aiter_raw():
        kept += chunk[: EXCERPT_BYTES - len(kept)]
        if len(kept) >= EXCERPT_BYTES:
            break
    # PostgreSQL text holds no NUL: one in the answer would make the outcome unwritable, and the
    # delivery would be sent again every lease.
    return kept.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


async def send(client: httpx.AsyncClient, message: Message, *, allow_private: bool, timeout_s: float) -> Result:
    """One attempt: check the destination, post, classify the answer. Never raises for what the
    receiver or the network does; those are failed results with an error to log."""
    started = time.perf_counter()
    try:
        check_url(message.url, allow_private=allow_private)
    except AddressRefused as exc:
        return Result("failed", error=f"refused: {exc}")
    body = body_of(message.payload)
    request = client.build_request(
        "POST", message.url, content=body.encode(), headers=headers_for(message, body), timeout=timeout_s
    )
    try:
        # The whole attempt, not each read, is bounded: a receiver trickling bytes still ends.
        async with asyncio.timeout(timeout_s):
            response = await client.send(request, stream=True, follow_redirects=False)
            try:
                excerpt = await _excerpt(response)
            finally:
                await response.aclose()
    except AddressRefused as exc:  # raised by the transport's connect (addresses.GuardedBackend)
        return Result("failed", latency_ms=_ms(started), error=f"refused: {exc}")
    except TimeoutError:
        return Result("failed", latency_ms=_ms(started), error=f"timed out after {timeout_s:g} s")
    except httpx.HTTPError as exc:
        return Result("failed", latency_ms=_ms(started), error=f"{type(exc).__name__}: {exc}"[:500])
    return Result(outcome_of(response.status_code), response.status_code, excerpt, _ms(started))


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a connection pool whose connects go through the SSRF guard."""

    def __init__(self, *, allow_private: bool, limits: httpx.Limits, ssl_context: ssl.SSLContext | None) -> None:
        super().__init__(trust_env=False, limits=limits)
        # The pool httpx builds, with our network backend: the same settings, made again.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context or httpx.create_ssl_context(trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=GuardedBackend(allow_private=allow_private),
        )


def client(*, allow_private: bool, ssl_context: ssl.SSLContext | None = None) -> httpx.AsyncClient:
    """The sender's HTTP client: every connection checked by the guard at connect time, no
    proxies from the environment (a proxy would connect to the name itself), no redirects,
    certificates verified against the name (``ssl_context``: other roots, for tests)."""
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)
    return httpx.AsyncClient(
        transport=GuardedTransport(allow_private=allow_private, limits=limits, ssl_context=ssl_context),
        trust_env=False,
        follow_redirects=False,
    )
