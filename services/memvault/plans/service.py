"""The limits part of the facade that is not an operation: counting refused credentials, which
both doors that take a bearer credential (REST's gateway/deps.py, MCP's mcp/http.py) call
through gateway/credentials.py. NamespaceAPI inherits it."""

from __future__ import annotations

from memvault.facade import FacadeBase
from memvault.ratelimit import client_address


class LimitOps(FacadeBase):
    async def count_bad_credential(self, host: str | None) -> None:
        """A credential from ``host`` was refused (401): count it against the address, and raise
        RateLimited (429) once the address has sent too many (plans/gate.py)."""
        await self._limit_gate.count_bad_credential(client_address(host))
