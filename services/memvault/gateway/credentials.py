"""The one place a bearer credential is checked for a door (REST and MCP): a refused credential
is counted against the client's address, and an address that keeps sending them is answered 429
with Retry-After instead of 401 (plans/gate.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.types import Scope

from memvault.errors import Unauthenticated
from memvault.principal import Principal

if TYPE_CHECKING:
    from memvault.api import NamespaceAPI


async def authenticated(
    api: NamespaceAPI, scope: Scope, check: Callable[[str], Awaitable[Principal]], raw: str
) -> Principal:
    try:
        return await check(raw)
    except Unauthenticated:
        client = scope.get("client")
        await api.count_bad_credential(client[0] if client else None)
        raise
