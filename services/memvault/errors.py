"""One error tree for every front door: REST renders it as problem JSON, MCP and jobs as messages."""

from __future__ import annotations

from typing import Any, ClassVar


class MemvaultError(Exception):
    """A failure the caller can act on. `code` is stable and documented in docs/api.md."""

    status: ClassVar[int] = 400
    code: ClassVar[str] = "bad_request"
    title: ClassVar[str] = "Bad request"
    # Seconds a client should wait before trying again: sent as `Retry-After` by every door.
    retry_after_s: int | None = None

    def __init__(self, detail: str | None = None, *, extra: dict[str, Any] | None = None) -> None:
        super().__init__(detail or self.title)
        self.detail = detail or self.title
        self.extra = extra or {}

    def problem(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": f"https://memvault.dev/errors/{self.code}",
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "code": self.code,
        }
        body.update(self.extra)
        return body

    def response_headers(self) -> dict[str, str]:
        """HTTP headers the answer carries on every door: Retry-After when the client may retry."""
        return {} if self.retry_after_s is None else {"Retry-After": str(self.retry_after_s)}


class Unauthenticated(MemvaultError):
    status = 401
    code = "unauthenticated"
    title = "Authentication required"


class Forbidden(MemvaultError):
    status = 403
    code = "forbidden"
    title = "Not allowed"


class NotFound(MemvaultError):
    status = 404
    code = "not_found"
    title = "Not found"


class Conflict(MemvaultError):
    status = 409
    code = "conflict"
    title = "Conflict"


class PayloadTooLarge(MemvaultError):
    status = 413
    code = "payload_too_large"
    title = "Request body too large"


class RequestTimeout(MemvaultError):
    status = 408
    code = "request_timeout"
    title = "Request timeout"


class InvalidInput(MemvaultError):
    status = 422
    code = "validation_error"
    title = "Invalid input"


class Unavailable(MemvaultError):
    status = 503
    code = "unavailable"
    title = "Service unavailable"


class NotReady(Unavailable):
    code = "not_ready"
    title = "Not ready"


class Overloaded(Unavailable):
    """The server process has more work than it takes at once (gateway/admission.py) or an
    operation waited too long for its turn (plans/fairshare.py): retry shortly, here or elsewhere."""

    code = "overloaded"
    title = "Overloaded"
    retry_after_s = 1


class DatabaseUnavailable(Unavailable):
    """PostgreSQL cannot be reached (down, restarting, refusing connections). The request's
    transaction did not commit, unless the connection broke during the commit itself; a retry with
    the same Idempotency-Key is safe either way. Raised by db/session.py, so every door sees it."""

    code = "database_unavailable"
    title = "Database unavailable"
    retry_after_s = 5

    def __init__(self, detail: str | None = None, *, extra: dict[str, Any] | None = None) -> None:
        super().__init__(detail or "The database is not reachable right now; try again shortly.", extra=extra)
