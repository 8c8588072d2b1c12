from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ARRAY, Text, cast, func, insert, or_, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.db.base import first_time
from memvault.db.pagination import newest_first
from memvault.keys import tokens
from memvault.keys.models import ApiKey


@dataclass(frozen=True)
class FoundKey:
    id: uuid.UUID
    tenant_id: uuid.UUID
    secret_hash: str
    name: str
    scopes: list[str]
    namespaces: list[str] | None
    default_namespace: str | None
    revoked_at: datetime | None
    last_used_at: datetime | None
    expires_at: datetime | None
    # When the secret that matched stops working: null for the current one, the end of the grace
    # period for the one a rotation replaced.
    secret_expires_at: datetime | None


FIND_KEY = "SELECT * FROM memvault_find_api_key(%(p)s)"


async def find_by_prefix(s: AsyncSession, prefix: str) -> FoundKey | None:
    """Through the SECURITY DEFINER function: the tenant is not known yet, so RLS would hide the row.
    Sent as the driver's own SQL, like the tenant transaction's settings (db/session.py): every
    request with a key runs it."""
    connection = await s.connection()
    row = (await connection.exec_driver_sql(FIND_KEY, {"p": prefix})).mappings().first()
    return FoundKey(**row) if row else None


async def create(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    *,
    name: str,
    scopes: list[str],
    namespaces: list[str] | None,
    default_namespace: str | None,
    expires_at: datetime | None = None,
) -> tuple[ApiKey, str]:
    key = tokens.new_key()
    row = await s.scalar(
        insert(ApiKey)
        .values(
            tenant_id=tenant_id,
            prefix=tokens.lookup_prefix(key),
            secret_hash=tokens.hash_key(key),
            name=name,
            scopes=scopes,
            namespaces=namespaces,
            default_namespace=default_namespace,
            expires_at=expires_at,
        )
        .returning(ApiKey)
    )
    assert row is not None
    return row, key


async def page(
    s: AsyncSession, tenant_id: uuid.UUID, *, within: frozenset[str] | None, limit: int, cursor: str | None
) -> tuple[list[ApiKey], str | None]:
    """Keys newest first. ``within``: only keys limited to a subset of these namespaces (what a
    namespace-limited admin may see, Principal.covers), filtered here so that pages stay full."""
    stmt = select(ApiKey).where(ApiKey.tenant_id == tenant_id)
    if within is not None:
        stmt = stmt.where(ApiKey.namespaces.is_not(None), ApiKey.namespaces.op("<@")(cast(sorted(within), ARRAY(Text))))
    rows, next_cursor = await newest_first(s, stmt, ApiKey.created_at, ApiKey.id, limit=limit, cursor=cursor)
    return list(rows), next_cursor


async def count_live(s: AsyncSession, tenant_id: uuid.UUID, *, lock: bool = False) -> int:
    """Keys neither revoked nor expired: what the `api_keys` quota counts. ``lock`` holds the
    tenant's key-creation lock to the end of the transaction, so that two creations at once
    cannot both see room for one."""
    if lock:
        await s.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended('memvault:api_keys:' || :t, 0))"), {"t": str(tenant_id)}
        )
    stmt = select(func.count()).where(
        ApiKey.tenant_id == tenant_id,
        ApiKey.revoked_at.is_(None),
        or_(ApiKey.expires_at.is_(None), ApiKey.expires_at > func.now()),
    )
    return int(await s.scalar(stmt) or 0)


async def get_for_update(s: AsyncSession, tenant_id: uuid.UUID, key_id: uuid.UUID) -> ApiKey | None:
    stmt = select(ApiKey).where(ApiKey.tenant_id == tenant_id, ApiKey.id == key_id).with_for_update()
    return await s.scalar(stmt)


async def rotate(s: AsyncSession, tenant_id: uuid.UUID, key_id: uuid.UUID, grace: timedelta) -> tuple[ApiKey, str]:
    """Give the key a new secret; the current one becomes the previous, valid for ``grace``. A
    previous secret still in its grace period is dropped: a key has at most two."""
    key = tokens.new_key()
    # In an UPDATE the right-hand sides read the row as it was, so the old secret moves over.
    stmt = (
        update(ApiKey)
        .where(ApiKey.tenant_id == tenant_id, ApiKey.id == key_id)
        .values(
            previous_prefix=ApiKey.prefix,
            previous_secret_hash=ApiKey.secret_hash,
            previous_expires_at=func.now() + grace,
            prefix=tokens.lookup_prefix(key),
            secret_hash=tokens.hash_key(key),
            rotated_at=func.now(),
        )
        .returning(ApiKey)
    )
    # populate_existing: the row was loaded FOR UPDATE in this session; return the new values.
    row = await s.scalar(stmt, execution_options={"synchronize_session": False, "populate_existing": True})
    assert row is not None
    return row, key


async def revoke(s: AsyncSession, tenant_id: uuid.UUID, key_id: uuid.UUID) -> ApiKey | None:
    stmt = (
        update(ApiKey)
        .where(ApiKey.tenant_id == tenant_id, ApiKey.id == key_id)
        .values(revoked_at=first_time(ApiKey.revoked_at))
        .returning(ApiKey)
    )
    return await s.scalar(stmt, execution_options={"synchronize_session": False})


async def mark_used(s: AsyncSession, tenant_id: uuid.UUID, key_id: uuid.UUID) -> None:
    await s.execute(
        update(ApiKey).where(ApiKey.tenant_id == tenant_id, ApiKey.id == key_id).values(last_used_at=func.now()),
        execution_options={"synchronize_session": False},
    )
