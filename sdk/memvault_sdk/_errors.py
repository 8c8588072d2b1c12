"""One exception tree for every failure, mapped from the server's problem JSON.

Branch on the class, or on ``code`` (stable, listed in the server's docs/api.md); ``request_id``
finds the request in the server's logs.
"""

from __future__ import annotations

import warnings
from typing import Any

import httpx

__all__ = [
    "APIStatusError",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "MemVaultConnectionError",
    "MemVaultError",
    "MemVaultTimeoutError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitError",
    "SecretDetectedError",
    "ServerError",
    "ValidationError",
]


class MemVaultError(Exception):
    """Base of every error this SDK raises."""

    status: int | None = None
    code: str | None = None
    request_id: str | None = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class MemVaultConnectionError(MemVaultError):
    """The server could not be reached, or the connection broke before an answer came."""

    def __init__(self, message: str = "Could not connect to the memvault server.", *, request: Any = None) -> None:
        super().__init__(message)
        self.request = request


class MemVaultTimeoutError(MemVaultConnectionError):
    """No answer within the client's timeout."""


class APIStatusError(MemVaultError):
    """The server answered with a 4xx or 5xx status."""

    def __init__(self, message: str, *, response: httpx.Response, body: dict[str, Any] | None) -> None:
        super().__init__(message)
        self.response = response
        self.body = body or {}
        self.status = response.status_code
        self.code = self.body.get("code")
        self.title = self.body.get("title")
        self.detail = self.body.get("detail")
        self.request_id = self.body.get("request_id") or response.headers.get("x-request-id")

    def __str__(self) -> str:
        rid = f" (request id {self.request_id})" if self.request_id else ""
        return f"{self.status} {self.code or 'error'}: {self.message}{rid}"


class BadRequestError(APIStatusError):
    pass


class AuthenticationError(APIStatusError):
    """401: no key, an unknown key or a revoked one."""


class PermissionDeniedError(APIStatusError):
    """403: the key lacks the scope, or the namespace is outside its allow-list."""


class NotFoundError(APIStatusError):
    """404: no such thing in your tenant."""


class ConflictError(APIStatusError):
    """409: a name is taken, or the change conflicts with the current state."""


class PayloadTooLargeError(APIStatusError):
    pass


class ValidationError(APIStatusError):
    """422: the request does not validate. ``field`` names the first field at fault
    (e.g. ``memories[3].content``), ``errors`` lists all of them."""

    def __init__(self, message: str, *, response: httpx.Response, body: dict[str, Any] | None) -> None:
        super().__init__(message, response=response, body=body)
        self.field: str | None = self.body.get("field")
        self.errors: list[dict[str, Any]] = list(self.body.get("errors") or [])


class SecretDetectedError(ValidationError):
    """422: the text looks like a credential and was not stored. ``kind`` names the kind of secret;
    the secret itself is never echoed."""

    def __init__(self, message: str, *, response: httpx.Response, body: dict[str, Any] | None) -> None:
        super().__init__(message, response=response, body=body)
        self.kind: str | None = self.body.get("kind")


class RateLimitError(APIStatusError):
    """429: too many requests. ``retry_after`` is the server's wait, in seconds, when it gave one."""

    def __init__(self, message: str, *, response: httpx.Response, body: dict[str, Any] | None) -> None:
        super().__init__(message, response=response, body=body)
        self.retry_after: float | None = retry_after_seconds(response)


class ServerError(APIStatusError):
    """5xx: the server failed; the request id finds it in its logs."""


_BY_STATUS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: ValidationError,
    429: RateLimitError,
}


def retry_after_seconds(response: httpx.Response) -> float | None:
    import email.utils
    import time

    raw = response.headers.get("retry-after-ms")
    if raw is not None:
        try:
            return float(raw) / 1000
        except ValueError:
            pass
    raw = response.headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        parsed = email.utils.parsedate_tz(raw)
        if parsed is None:
            return None
        return max(0.0, email.utils.mktime_tz(parsed) - time.time())


def error_from_response(response: httpx.Response) -> APIStatusError:
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = None
    message = (body or {}).get("detail") or response.reason_phrase or f"HTTP {response.status_code}"
    cls: type[APIStatusError]
    if body and body.get("code") == "secret_detected":
        cls = SecretDetectedError
    elif response.status_code >= 500:
        cls = ServerError
    else:
        cls = _BY_STATUS.get(response.status_code, APIStatusError)
    return cls(str(message), response=response, body=body)


# The names these classes had before 0.2: they shadowed Python's own ConnectionError and
# TimeoutError in `from memvault_sdk import *` and in this module, so they are reachable only here.
_DEPRECATED = {"ConnectionError": "MemVaultConnectionError", "TimeoutError": "MemVaultTimeoutError"}


def _deprecated_alias(module: str, name: str) -> type[MemVaultError]:
    """The class a pre-0.2 name stands for, with a DeprecationWarning; AttributeError otherwise."""
    if name not in _DEPRECATED:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    new = _DEPRECATED[name]
    warnings.warn(f"memvault_sdk.{name} is deprecated; use memvault_sdk.{new}.", DeprecationWarning, stacklevel=3)
    cls: type[MemVaultError] = globals()[new]
    return cls


def __getattr__(name: str) -> type[MemVaultError]:
    return _deprecated_alias(__name__, name)
