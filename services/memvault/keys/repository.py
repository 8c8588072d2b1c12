from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

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
        )
        .returning(ApiKey)
    )
    assert row is not None
    return row, key


async def list_all(s: AsyncSession, tenant_id: uuid.UUID) -> list[ApiKey]:
    stmt = select(ApiKey).where(ApiKey.tenant_id == tenant_id).order_by(ApiKey.created_at, ApiKey.id)
    return list((await s.scalars(stmt)).all())


async def revoke(s: AsyncSession, tenant_id: uuid.UUID, key_id: uuid.UUID) -> ApiKey | None:
    stmt = (
        update(ApiKey)
        .where(ApiKey.tenant_id == tenant_id, ApiKey.id == key_id)
        .values(revoked_at=func.coalesce(ApiKey.revoked_at, func.now()))
        .returning(ApiKey)
    )
    return await s.scalar(stmt, execution_options={"synchronize_session": False})


async def mark_used(s: AsyncSession, tenant_id: uuid.UUID, key_id: uuid.UUID) -> None:
    await s.execute(
        update(ApiKey).where(ApiKey.tenant_id == tenant_id, ApiKey.id == key_id).values(last_used_at=func.now()),
        execution_options={"synchronize_session": False},
    )
