"""What every call shares: configuration, headers, the retry loop with jittered exponential backoff
and `Retry-After`, one Idempotency-Key per logical write (the same on every retry), and the
mapping of error responses to exception classes.

The retry loop is written once, as a flow: a generator that yields what it needs done (send an
attempt, or pause) and is sent back the outcome. The blocking and the asyncio client differ only
in the small driver that does those two things."""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from memvault_sdk._errors import (
    MemVaultConnectionError,
    MemVaultError,
    MemVaultTimeoutError,
    error_from_response,
    retry_after_seconds,
)
from memvault_sdk._request import NOT_GIVEN, APIRequest, NotGiven, segment
from memvault_sdk._version import __version__

__all__ = ["NOT_GIVEN", "AsyncAPIClient", "BaseClient", "Flow", "NotGiven", "Sleep", "SyncAPIClient"]

T = TypeVar("T")
C = TypeVar("C", bound="BaseClient")

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
DEFAULT_NAMESPACE = "default"
DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=5.0)
DEFAULT_MAX_RETRIES = 2
INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
# A server asking for a longer wait than this is better reported than waited on.
MAX_RETRY_AFTER = 60.0
_RETRY_STATUSES = frozenset({500, 502, 503, 504})


@dataclass(frozen=True)
class Attempt:
    """Send this request once; the flow is sent back the response or the transport error."""

    request: APIRequest[Any]
    headers: dict[str, str]


@dataclass(frozen=True)
class Sleep:
    seconds: float


Outcome = httpx.Response | httpx.TransportError | None
Flow = Generator[Attempt | Sleep, Outcome, T]


class BaseClient:
    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None,
        namespace: str | None,
        timeout: float | httpx.Timeout | None,
        max_retries: int,
        default_headers: Mapping[str, str] | None,
    ) -> None:
        api_key = api_key or os.environ.get("MEMVAULT_API_KEY")
        if not api_key:
            raise MemVaultError("No API key: pass api_key=... or set MEMVAULT_API_KEY.")
        self.api_key = api_key
        self.base_url = (base_url or os.environ.get("MEMVAULT_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.namespace = namespace or os.environ.get("MEMVAULT_NAMESPACE") or DEFAULT_NAMESPACE
        self.timeout = timeout if timeout is not None else DEFAULT_TIMEOUT
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        self.max_retries = max_retries
        self.default_headers = dict(default_headers or {})

    def _options(self) -> dict[str, Any]:
        return {
            "api_key": self.api_key,
            "base_url": self.base_url,
            "namespace": self.namespace,
            "timeout": self.timeout,
            "max_retries": self.max_retries,
            "default_headers": self.default_headers,
        }

    def namespace_path(self, namespace: str | None) -> str:
        return f"/v1/namespaces/{segment(namespace or self.namespace)}"

    def flow(self, req: APIRequest[T]) -> Flow[T]:
        """One call with its retries: attempts until one succeeds, fails for good, or retries run out."""
        key = self._idempotency_key(req)
        attempt = 0
        while True:
            outcome = yield Attempt(req, self._headers(req, key, attempt))
            if isinstance(outcome, httpx.TransportError):
                if attempt < self.max_retries and self._retry_on_error(req, outcome):
                    yield Sleep(self._delay(attempt, None))
                    attempt += 1
                    continue
                raise self._transport_error(outcome, req) from outcome
            assert outcome is not None
            if outcome.is_success:
                return req.returns.parse(outcome)
            if attempt < self.max_retries and self._retry_on_response(req, outcome):
                yield Sleep(self._delay(attempt, outcome))
                attempt += 1
                continue
            raise error_from_response(outcome)

    def _flow_of(self, call: APIRequest[T] | Flow[T]) -> Flow[T]:
        return self.flow(call) if isinstance(call, APIRequest) else call

    def _send_args(self, step: Attempt) -> dict[str, Any]:
        req = step.request
        return {
            "method": req.method,
            "url": self.base_url + req.path,
            "params": req.params,
            "json": req.json(),
            "content": req.content,
            "headers": step.headers,
            "timeout": self.timeout,
        }

    def _headers(self, req: APIRequest[Any], idempotency_key: str | None, attempt: int) -> dict[str, str]:
        headers = {
            "Authorization": f"Bearer {self.api_key}",
            "Accept": "application/json",
            "User-Agent": f"memvault-sdk/{__version__} python",
            **self.default_headers,
            **req.headers,
        }
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        if attempt:
            headers["X-Retry-Count"] = str(attempt)
        return headers

    @staticmethod
    def _idempotency_key(req: APIRequest[Any]) -> str | None:
        if req.retry_mode != "write":
            return None
        return req.idempotency_key or f"mv-sdk-{uuid.uuid4()}"

    def _retry_on_error(self, req: APIRequest[Any], exc: httpx.TransportError) -> bool:
        if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout):
            return True  # the request never reached the server
        return req.retry_mode != "once"

    def _retry_on_response(self, req: APIRequest[Any], response: httpx.Response) -> bool:
        if response.status_code == 429:
            # A monthly quota used up comes back when the month ends, not within any retry.
            return _code(response) != "quota_exceeded"
        if response.status_code == 409 and req.retry_mode == "write":
            # The first attempt is still running on the server; its answer will be replayed.
            return _code(response) == "idempotency_in_progress"
        return response.status_code in _RETRY_STATUSES and req.retry_mode != "once"

    @staticmethod
    def _delay(attempt: int, response: httpx.Response | None) -> float:
        if response is not None:
            wait = retry_after_seconds(response)
            if wait is not None and 0 <= wait <= MAX_RETRY_AFTER:
                return wait
        backoff = min(INITIAL_RETRY_DELAY * 2.0**attempt, MAX_RETRY_DELAY)
        return backoff * (1 - 0.25 * random.random())

    @staticmethod
    def _transport_error(exc: httpx.TransportError, request: APIRequest[Any]) -> MemVaultConnectionError:
        if isinstance(exc, httpx.TimeoutException):
            return MemVaultTimeoutError(f"The request timed out: {exc}", request=request)
        return MemVaultConnectionError(f"Connection error: {exc or type(exc).__name__}", request=request)


def _code(response: httpx.Response) -> str | None:
    try:
        data = response.json()
    except ValueError:
        return None
    return data.get("code") if isinstance(data, dict) else None


class SyncAPIClient(BaseClient):
    def __init__(self, *, http_client: httpx.Client | None = None, **options: Any) -> None:
        super().__init__(**options)
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(timeout=self.timeout)

    def run(self, call: APIRequest[T] | Flow[T]) -> T:
        """Drive a call to its end: send each attempt, sleep each pause."""
        flow = self._flow_of(call)
        outcome: Outcome = None
        while True:
            try:
                step = flow.send(outcome)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            if isinstance(step, Sleep):
                time.sleep(step.seconds)
                outcome = None
                continue
            try:
                outcome = self._http.request(**self._send_args(step))
            except httpx.TransportError as exc:
                outcome = exc

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self: C) -> C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncAPIClient(BaseClient):
    def __init__(self, *, http_client: httpx.AsyncClient | None = None, **options: Any) -> None:
        super().__init__(**options)
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=self.timeout)

    async def run(self, call: APIRequest[T] | Flow[T]) -> T:
        """Drive a call to its end: send each attempt, sleep each pause, without blocking the loop."""
        flow = self._flow_of(call)
        outcome: Outcome = None
        while True:
            try:
                step = flow.send(outcome)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            if isinstance(step, Sleep):
                await asyncio.sleep(step.seconds)
                outcome = None
                continue
            try:
                outcome = await self._http.request(**self._send_args(step))
            except httpx.TransportError as exc:
                outcome = exc

    async def close(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self: C) -> C:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
