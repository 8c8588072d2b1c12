"""The API-key part of the facade: resolve a bearer key to its Principal, and create, list,
rotate and revoke keys. NamespaceAPI inherits it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from memvault.errors import Conflict, NotFound, Unauthenticated
from memvault.facade import FacadeBase
from memvault.keys import repository as keys_repo
from memvault.keys import tokens
from memvault.keys.schemas import KeyCreated, KeyIn, KeyOut, KeyPage, KeyRotateIn
from memvault.operations import operation
from memvault.plans.room import take_room
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


class ExpiredApiKey(Unauthenticated):
    code = "api_key_expired"
    title = "API key expired"


class RotatedApiKey(Unauthenticated):
    """The secret a rotation replaced, after its grace period: the key itself lives on."""

    code = "api_key_rotated"
    title = "API key secret replaced"


class KeyNotActive(Conflict):
    """A revoked or expired key has no secret worth replacing: make a new key instead."""

    code = "api_key_not_active"
    title = "API key not active"


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat()


class KeyOps(FacadeBase):
    async def authenticate(self, raw_key: str) -> Principal:
        """Resolve a bearer API key to its Principal, or raise 401."""
        if not tokens.looks_like_key(raw_key):
            raise InvalidApiKey("The bearer token is not a memvault API key.")
        async with self._db.lookup() as s:
            found = await keys_repo.find_by_prefix(s, tokens.lookup_prefix(raw_key))
        if found is None or not tokens.matches(raw_key, found.secret_hash):
            raise InvalidApiKey("The API key is not valid.")
        if found.revoked_at is not None:
            raise RevokedApiKey("The API key has been revoked.")
        now = datetime.now(UTC)
        if found.expires_at is not None and now >= found.expires_at:
            raise ExpiredApiKey(
                f"The API key expired at {_iso(found.expires_at)}; create a new one.",
                extra={"expired_at": _iso(found.expires_at)},
            )
        if found.secret_expires_at is not None and now >= found.secret_expires_at:
            raise RotatedApiKey(
                f"This secret was replaced when the key was rotated; it stopped working at "
                f"{_iso(found.secret_expires_at)}. Use the key's new secret.",
                extra={"expired_at": _iso(found.secret_expires_at)},
            )
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
        limits = (await self._plans.of(p.tenant_id)).limits
        async with self._db.tenant_tx(p.tenant_id) as tx:
            if limits.api_keys is not None:
                used = await keys_repo.count_live(tx.session, p.tenant_id, lock=True)
                await take_room(tx, limits, "api_keys", used=used)
            row, raw = await keys_repo.create(
                tx.session,
                p.tenant_id,
                name=body.name,
                scopes=[*body.scopes, OPERATOR] if operator else body.scopes,
                namespaces=body.namespaces,
                default_namespace=body.default_namespace,
                expires_at=body.expires_at,
            )
            await self._audit(
                tx,
                p,
                "key.create",
                target_id=str(row.id),
                detail={
                    "scopes": body.scopes,
                    "namespaces": body.namespaces,
                    "expires_at": _iso(body.expires_at) if body.expires_at else None,
                },
            )
        return KeyCreated.model_validate({**KeyOut.model_validate(row).model_dump(), "key": raw})

    @operation("read")
    async def list_keys(self, p: Principal, *, limit: int = 50, cursor: str | None = None) -> KeyPage:
        """The keys this principal may act on (Principal.covers), newest first; follow `next_cursor`."""
        p.require("admin")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            rows, next_cursor = await keys_repo.page(
                tx.session, p.tenant_id, within=p.namespaces, limit=limit, cursor=cursor
            )
        return KeyPage(data=[KeyOut.model_validate(r) for r in rows], next_cursor=next_cursor)

    @operation("write")
    async def rotate_key(self, p: Principal, key_id: uuid.UUID, body: KeyRotateIn) -> KeyCreated:
        """Give a key a new secret (in the response once); the old secret keeps working for
        ``grace_seconds``. The key's id, name, scopes and namespaces stay."""
        p.require("admin")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            row = await keys_repo.get_for_update(tx.session, p.tenant_id, key_id)
            if row is None:
                raise KeyNotFound(f"No API key with id {key_id}.")
            p.require_reach("admin", row.namespaces)
            if row.revoked_at is not None:
                raise KeyNotActive(
                    "The API key has been revoked; create a new key instead.", extra={"state": "revoked"}
                )
            if row.expires_at is not None and row.expires_at <= datetime.now(UTC):
                raise KeyNotActive("The API key has expired; create a new key instead.", extra={"state": "expired"})
            row, raw = await keys_repo.rotate(tx.session, p.tenant_id, key_id, timedelta(seconds=body.grace_seconds))
            await self._audit(
                tx,
                p,
                "key.rotate",
                target_id=str(key_id),
                detail={"grace_seconds": body.grace_seconds, "previous_prefix": row.previous_prefix},
            )
        return KeyCreated.model_validate({**KeyOut.model_validate(row).model_dump(), "key": raw})

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
