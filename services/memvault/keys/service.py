"""The API-key part of the facade: resolve a bearer key to its Principal, and create, list and
revoke keys. NamespaceAPI inherits it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from memvault.errors import NotFound, Unauthenticated
from memvault.facade import FacadeBase
from memvault.keys import repository as keys_repo
from memvault.keys import tokens
from memvault.keys.schemas import KeyCreated, KeyIn, KeyOut
from memvault.operations import operation
from memvault.principal import OPERATOR, Principal

# A key's last-used time is written at most this often, so reads do not each cost a write.
LAST_USED_RESOLUTION = timedelta(seconds=60)


class KeyNotFound(NotFound):
    code = "api_key_not_found"
    title = "API key not found"


class InvalidApiKey(Unauthenticated):
    code = "invalid_api_key"
    title = "Invalid API key"


class RevokedApiKey(Unauthenticated):
    code = "api_key_revoked"
    title = "API key revoked"


class KeyOps(FacadeBase):
    async def authenticate(self, raw_key: str) -> Principal:
        """Resolve a bearer API key to its Principal, or raise 401."""
        if not tokens.looks_like_key(raw_key):
            raise InvalidApiKey("The bearer token is not a memvault API key.")
        async with self._db.unscoped() as s:
            found = await keys_repo.find_by_prefix(s, tokens.lookup_prefix(raw_key))
        if found is None or not tokens.matches(raw_key, found.secret_hash):
            raise InvalidApiKey("The API key is not valid.")
        if found.revoked_at is not None:
            raise RevokedApiKey("The API key has been revoked.")
        now = datetime.now(UTC)
        if found.last_used_at is None or now - found.last_used_at > LAST_USED_RESOLUTION:
            async with self._db.tenant_tx(found.tenant_id) as tx:
                await keys_repo.mark_used(tx.session, found.tenant_id, found.id)
        return Principal(
            tenant_id=found.tenant_id,
            scopes=frozenset(found.scopes),
            subject=f"key:{found.id}",
            namespaces=frozenset(found.namespaces) if found.namespaces is not None else None,
            default_namespace=found.default_namespace,
            key_id=found.id,
        )

    @operation("write")
    async def create_key(self, p: Principal, body: KeyIn, *, operator: bool = False) -> KeyCreated:
        """Create an API key. The key is in the response once and never again. ``operator`` (CLI
        only) adds the scope that writes system-wide memories."""
        p.require_reach("admin", body.namespaces)
        if operator:
            p.require(OPERATOR)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            row, raw = await keys_repo.create(
                tx.session,
                p.tenant_id,
                name=body.name,
                scopes=[*body.scopes, OPERATOR] if operator else body.scopes,
                namespaces=body.namespaces,
                default_namespace=body.default_namespace,
            )
            await self._audit(
                tx,
                p,
                "key.create",
                target_id=str(row.id),
                detail={"scopes": body.scopes, "namespaces": body.namespaces},
            )
        return KeyCreated.model_validate({**KeyOut.model_validate(row).model_dump(), "key": raw})

    @operation("read")
    async def list_keys(self, p: Principal) -> list[KeyOut]:
        p.require("admin")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            rows = await keys_repo.list_all(tx.session, p.tenant_id)
        return [KeyOut.model_validate(r) for r in rows if p.covers(r.namespaces)]

    @operation("write")
    async def revoke_key(self, p: Principal, key_id: uuid.UUID) -> KeyOut:
        """Revoke an API key at once; revoking twice is harmless."""
        p.require("admin")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            row = await keys_repo.revoke(tx.session, p.tenant_id, key_id)
            if row is None:
                raise KeyNotFound(f"No API key with id {key_id}.")
            # Raised inside the transaction, so the revocation rolls back.
            p.require_reach("admin", row.namespaces)
            await self._audit(tx, p, "key.revoke", target_id=str(key_id))
        return KeyOut.model_validate(row)
