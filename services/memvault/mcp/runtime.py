"""What every MCP tool needs: the facade, the caller's Principal, its namespace, and one way to
turn failures into readable tool errors.

Over HTTP the Principal comes from the bearer credential, checked by the /mcp endpoint before the
MCP layer sees the request; over stdio it is fixed when the bridge starts. Tools never look for a
tenant anywhere else.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from memvault.errors import MemvaultError
from memvault.fields import as_error
from memvault.metering.tally import through
from memvault.principal import Principal

log = logging.getLogger(__name__)

T = TypeVar("T")

PRINCIPAL_STATE = "memvault_principal"

# The /mcp endpoint also puts the request's Principal here, for the one place the MCP SDK passes no
# Context (static resources). Tools and template resources read it from the request instead.
_request_principal: ContextVar[Principal | None] = ContextVar("memvault_mcp_principal", default=None)


def current_principal() -> Principal:
    p = _request_principal.get()
    if p is None:
        raise ToolError("unauthenticated: no credentials reached this resource")
    return p


def bind_principal(p: Principal) -> Token[Principal | None]:
    return _request_principal.set(p)


def unbind_principal(token: Token[Principal | None]) -> None:
    _request_principal.reset(token)


class NoNamespace(MemvaultError):
    status = 422
    code = "namespace_required"
    title = "Namespace required"


@dataclass
class Runtime:
    """The facade getter (the app builds the facade in its lifespan, after the tools exist) and,
    for stdio, the fixed Principal."""

    api: Callable[[], Any]
    fixed_principal: Principal | None = None
    default_namespace: str = "default"
    # The project the client runs in, known only when it launched this process (stdio): where
    # memory_status looks for the rule files of `memvault mcp setup`. None over HTTP.
    project_dir: Path | None = None

    def principal(self, ctx: Context) -> Principal:
        if self.fixed_principal is not None:
            return self.fixed_principal
        request = ctx.request_context.request
        principal = getattr(getattr(request, "state", None), PRINCIPAL_STATE, None)
        return principal if principal is not None else current_principal()

    def namespace(self, p: Principal, requested: str | None) -> str:
        """The call's `namespace`, else the key's default, else the only namespace it may use,
        else `default`."""
        if requested:
            return requested
        if p.default_namespace:
            return p.default_namespace
        if p.namespaces is not None and len(p.namespaces) == 1:
            return next(iter(p.namespaces))
        return self.default_namespace

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run one facade call; our errors become tool errors a model can act on (code and detail),
        anything else a short message without internals (the log has the traceback)."""
        try:
            with through("mcp"):
                return await fn()
        except MemvaultError as exc:
            raise _tool_error(exc) from exc
        except ValidationError as exc:
            # The same reading as REST's: a secret refused by the models keeps its code.
            raise _tool_error(as_error(exc)) from exc
        except ValueError as exc:
            raise ToolError(f"validation_error: {exc}") from exc
        except ToolError:
            raise
        except Exception as exc:
            log.exception("MCP tool call failed")
            raise ToolError("internal_error: the memory service failed on this call; try again later") from exc


def _tool_error(exc: MemvaultError) -> ToolError:
    field = exc.extra.get("field")
    if field and exc.detail.startswith(f"{field}: "):
        # A bad field reads as a bad tool argument does (tool.py): `validation_error: field x: ...`.
        return ToolError(f"{exc.code}: field {exc.detail}")
    extra = f" (field: {field})" if field else ""
    return ToolError(f"{exc.code}: {exc.detail}{extra}")
