"""Idempotency keys: a client that retries a write with the same Idempotency-Key gets the first
answer back instead of a second write.

The key is claimed in its own short transaction before the write runs and completed with the
response after it, so a duplicate that arrives meanwhile sees the claim (409, retry later) rather
than waiting on, or racing, the write. A write that fails releases the claim, so the retry runs it
again. A claim is the tenant's for 24 hours; after that the key is free to mean something new.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from memvault.errors import Conflict, InvalidInput
from memvault.facade import FacadeBase
from memvault.idempotency import repository as idem_repo
from memvault.principal import Principal

KEY_TTL = timedelta(hours=24)


class IdempotencyKeyReused(InvalidInput):
    code = "idempotency_key_reused"
    title = "Idempotency key reused"


class IdempotencyInProgress(Conflict):
    code = "idempotency_in_progress"
    title = "Idempotent request in progress"


@dataclass(frozen=True)
class StoredResponse:
    status: int
    body: str | None
    headers: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, object]:
        return {"body": self.body, "headers": self.headers}


class IdempotencyOps(FacadeBase):
    async def claim_idempotency_key(
        self, p: Principal, key: str, *, method: str, path: str, request_hash: str
    ) -> StoredResponse | None:
        """Claim ``key`` for this request. None: go ahead and run it, then complete or release the
        key. A StoredResponse: the same request already ran; answer with it. Raises 422
        `idempotency_key_reused` when the key was used for a different request (another body,
        route or caller) and 409 `idempotency_in_progress` while the first request still runs."""
        p.require("write")
        for _ in range(3):
            async with self._db.tenant_tx(p.tenant_id) as tx:
                # Expired keys go first, so an old key is claimed afresh rather than replayed.
                await idem_repo.purge_expired(tx.session, p.tenant_id, datetime.now(UTC) - KEY_TTL)
                if await idem_repo.claim(
                    tx.session, p.tenant_id, key, subject=p.subject, method=method, path=path, request_hash=request_hash
                ):
                    return None
                row = await idem_repo.get(tx.session, p.tenant_id, key)
            if row is None:
                continue  # released by a failed first request between our two statements: claim again
            if (row.subject, row.method, row.path, row.request_hash) != (p.subject, method, path, request_hash):
                raise IdempotencyKeyReused(
                    "This Idempotency-Key was already used for a different request; use a new key for a new request.",
                    extra={"field": "Idempotency-Key"},
                )
            if row.status is None or row.response is None:
                raise IdempotencyInProgress(
                    "A request with this Idempotency-Key is still being processed; retry shortly."
                )
            return StoredResponse(
                status=row.status, body=row.response.get("body"), headers=dict(row.response.get("headers") or {})
            )
        raise IdempotencyInProgress("A request with this Idempotency-Key is still being processed; retry shortly.")

    async def complete_idempotency_key(self, p: Principal, key: str, response: StoredResponse) -> None:
        """Store the answer a claimed key's request got, for its retries."""
        async with self._db.tenant_tx(p.tenant_id) as tx:
            await idem_repo.complete(tx.session, p.tenant_id, key, response.status, response.as_json())

    async def release_idempotency_key(self, p: Principal, key: str) -> None:
        """Free a claimed key whose request failed, so that a retry runs it again."""
        async with self._db.tenant_tx(p.tenant_id) as tx:
            await idem_repo.release(tx.session, p.tenant_id, key)
