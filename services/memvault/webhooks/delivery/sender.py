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
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import httpx
from standardwebhooks.webhooks import Webhook

from memvault.webhooks.delivery.addresses import AddressRefused, check

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
    return kept.decode("utf-8", errors="replace")


async def send(client: httpx.AsyncClient, message: Message, *, allow_private: bool, timeout_s: float) -> Result:
    """One attempt: check the destination, post, classify the answer. Never raises for what the
    receiver or the network does; those are failed results with an error to log."""
    started = time.perf_counter()
    try:
        target = await check(message.url, allow_private=allow_private)
    except AddressRefused as exc:
        return Result("failed", error=f"refused: {exc}")
    body = body_of(message.payload)
    headers = headers_for(message, body) | {"host": target.host_header}
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    request = client.build_request(
        "POST", target.url, content=body.encode(), headers=headers, extensions=extensions, timeout=timeout_s
    )
    try:
        # The whole attempt, not each read, is bounded: a receiver trickling bytes still ends.
        async with asyncio.timeout(timeout_s):
            response = await client.send(request, stream=True, follow_redirects=False)
            try:
                excerpt = await _excerpt(response)
            finally:
                await response.aclose()
    except TimeoutError:
        return Result("failed", latency_ms=_ms(started), error=f"timed out after {timeout_s:g} s")
    except httpx.HTTPError as exc:
        return Result("failed", latency_ms=_ms(started), error=f"{type(exc).__name__}: {exc}"[:500])
    return Result(outcome_of(response.status_code), response.status_code, excerpt, _ms(started))


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def client() -> httpx.AsyncClient:
    """The sender's HTTP client: no proxies from the environment (a proxy would connect to the
    name, not the checked address), no redirects, certificates verified against the name."""
    return httpx.AsyncClient(
        trust_env=False,
        follow_redirects=False,
        limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
    )
