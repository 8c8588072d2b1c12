"""What every call shares: configuration, headers, the retry loop with jittered exponential backoff
and `Retry-After`, one Idempotency-Key per logical write (the same on every retry), and the
mapping of error responses to exception classes. Resources only describe requests."""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from functools import lru_cache
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter

from memvault_sdk._errors import (
    ConnectionError,
    MemVaultError,
    TimeoutError,
    error_from_response,
    retry_after_seconds,
)
from memvault_sdk._version import __version__

T = TypeVar("T")

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
DEFAULT_NAMESPACE = "default"
DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=5.0)
DEFAULT_MAX_RETRIES = 2
INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
# A server asking for a longer wait than this is better reported than waited on.
MAX_RETRY_AFTER = 60.0
_RETRY_STATUSES = frozenset({500, 502, 503, 504})


class NotGiven:
    """Marks an argument that was left out, where ``None`` means "clear this field"."""

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN = NotGiven()


@dataclass(frozen=True)
class APIRequest:
    method: str
    path: str
    params: Mapping[str, Any] | None = None
    json: Any = None
    content: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    # A write the server deduplicates by Idempotency-Key: one key per call, reused on retries.
    idempotent_write: bool = False
    idempotency_key: str | None = None
    # Whether repeating the request is harmless even if an earlier attempt reached the server.
    retry_safe: bool = True
    jsonl: bool = False

    def with_params(self, **params: Any) -> APIRequest:
        return replace(self, params={**(self.params or {}), **params})


def body(model: type[BaseModel], **fields: Any) -> dict[str, Any]:
    """A request body from keyword arguments: left-out (None or NOT_GIVEN) fields are not sent,
    so the server applies its defaults."""
    given = {k: v for k, v in fields.items() if v is not None and not isinstance(v, NotGiven)}
    return model.model_validate(given).model_dump(mode="json", exclude_unset=True)


def patch_body(model: type[BaseModel], **fields: Any) -> dict[str, Any]:
    """A PATCH body: NOT_GIVEN fields stay as they are, None clears a field."""
    given = {k: v for k, v in fields.items() if not isinstance(v, NotGiven)}
    return model.model_validate(given).model_dump(mode="json", exclude_unset=True)


def params(**values: Any) -> dict[str, Any]:
    """Query parameters: None left out, lists repeated, times in ISO 8601, dicts as JSON."""
    out: dict[str, Any] = {}
    for k, v in values.items():
        if v is None or isinstance(v, NotGiven):
            continue
        if isinstance(v, bool):
            out[k] = "true" if v else "false"
        elif isinstance(v, datetime | date):
            out[k] = v.isoformat()
        elif isinstance(v, dict):
            out[k] = json.dumps(v)
        elif isinstance(v, list | tuple):
            out[k] = [str(x) for x in v]
        else:
            out[k] = str(v)
    return out


def segment(value: object) -> str:
    return quote(str(value), safe="")


@lru_cache(maxsize=256)
def _adapter(tp: Any) -> TypeAdapter[Any]:
    return TypeAdapter(tp)


def cast(tp: Any, data: Any) -> Any:
    if tp is None:
        return None
    return _adapter(tp).validate_python(data)


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

    def namespace_path(self, namespace: str | None) -> str:
        return f"/v1/namespaces/{segment(namespace or self.namespace)}"

    def _headers(self, req: APIRequest, idempotency_key: str | None, attempt: int) -> dict[str, str]:
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
    def _idempotency_key(req: APIRequest) -> str | None:
        if req.idempotency_key is not None:
            return req.idempotency_key
        return f"mv-sdk-{uuid.uuid4()}" if req.idempotent_write else None

    def _retry_on_error(self, req: APIRequest, exc: httpx.TransportError) -> bool:
        if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout):
            return True  # the request never reached the server
        return req.retry_safe or req.idempotent_write

    def _retry_on_response(self, req: APIRequest, response: httpx.Response) -> bool:
        if response.status_code == 429:
            return True
        if response.status_code == 409 and req.idempotent_write:
            # The first attempt is still running on the server; its answer will be replayed.
            return _code(response) == "idempotency_in_progress"
        return response.status_code in _RETRY_STATUSES and (req.retry_safe or req.idempotent_write)

    @staticmethod
    def _delay(attempt: int, response: httpx.Response | None) -> float:
        if response is not None:
            wait = retry_after_seconds(response)
            if wait is not None and 0 <= wait <= MAX_RETRY_AFTER:
                return wait
        backoff = min(INITIAL_RETRY_DELAY * 2**attempt, MAX_RETRY_DELAY)
        return backoff * (1 - 0.25 * random.random())

    @staticmethod
    def _transport_error(exc: httpx.TransportError, request: APIRequest) -> ConnectionError:
        if isinstance(exc, httpx.TimeoutException):
            return TimeoutError(f"The request timed out: {exc}", request=request)
        return ConnectionError(f"Connection error: {exc or type(exc).__name__}", request=request)

    @staticmethod
    def _parse(req: APIRequest, response: httpx.Response, cast_to: Any) -> Any:
        if response.status_code == 204 or cast_to is None:
            return None
        if req.jsonl:
            return [json.loads(line) for line in response.text.splitlines() if line.strip()]
        return cast(cast_to, response.json())


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

    def request(self, req: APIRequest, cast_to: Any) -> Any:
        key = self._idempotency_key(req)
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    req.method,
                    self.base_url + req.path,
                    params=req.params,
                    json=req.json,
                    content=req.content,
                    headers=self._headers(req, key, attempt),
                    timeout=self.timeout,
                )
            except httpx.TransportError as exc:
                if attempt < self.max_retries and self._retry_on_error(req, exc):
                    time.sleep(self._delay(attempt, None))
                    attempt += 1
                    continue
                raise self._transport_error(exc, req) from exc
            if response.is_success:
                return self._parse(req, response, cast_to)
            if attempt < self.max_retries and self._retry_on_response(req, response):
                time.sleep(self._delay(attempt, response))
                attempt += 1
                continue
            raise error_from_response(response)

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncAPIClient(BaseClient):
    def __init__(self, *, http_client: httpx.AsyncClient | None = None, **options: Any) -> None:
        super().__init__(**options)
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=self.timeout)

    async def request(self, req: APIRequest, cast_to: Any) -> Any:
        key = self._idempotency_key(req)
        attempt = 0
        while True:
            try:
                response = await self._http.request(
                    req.method,
                    self.base_url + req.path,
                    params=req.params,
                    json=req.json,
                    content=req.content,
                    headers=self._headers(req, key, attempt),
                    timeout=self.timeout,
                )
            except httpx.TransportError as exc:
                if attempt < self.max_retries and self._retry_on_error(req, exc):
                    await asyncio.sleep(self._delay(attempt, None))
                    attempt += 1
                    continue
                raise self._transport_error(exc, req) from exc
            if response.is_success:
                return self._parse(req, response, cast_to)
            if attempt < self.max_retries and self._retry_on_response(req, response):
                await asyncio.sleep(self._delay(attempt, response))
                attempt += 1
                continue
            raise error_from_response(response)

    async def close(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self: T) -> T:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
