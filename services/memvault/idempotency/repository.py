from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.idempotency.models import IdempotencyKey


async def purge_expired(s: AsyncSession, tenant_id: uuid.UUID, before: datetime) -> int:
    result = await s.execute(
        delete(IdempotencyKey).where(IdempotencyKey.tenant_id == tenant_id, IdempotencyKey.created_at < before)
    )
    return result.rowcount or 0  # type: ignore[attr-defined]


async def claim(
    s: AsyncSession, tenant_id: uuid.UUID, key: str, *, subject: str, method: str, path: str, request_hash: str
) -> bool:
    """Insert the key as in flight; False when the tenant already holds it. A concurrent claim of the
    same key waits on the primary key until the first one commits, then finds it taken."""
    result = await s.execute(
        insert(IdempotencyKey)
        .values(tenant_id=tenant_id, key=key, subject=subject, method=method, path=path, request_hash=request_hash)
        .on_conflict_do_nothing(index_elements=["tenant_id", "key"])
        .returning(IdempotencyKey.key)
    )
    return result.scalar_one_or_none() is not None


async def get(s: AsyncSession, tenant_id: uuid.UUID, key: str) -> IdempotencyKey | None:
    return await s.scalar(
        select(IdempotencyKey).where(IdempotencyKey.tenant_id == tenant_id, IdempotencyKey.key == key)
    )


async def complete(s: AsyncSession, tenant_id: uuid.UUID, key: str, status: int, response: dict[str, Any]) -> None:
    await s.execute(
        update(IdempotencyKey)
        .where(IdempotencyKey.tenant_id == tenant_id, IdempotencyKey.key == key)
        .values(status=status, response=response, completed_at=func.now())
    )


async def release(s: AsyncSession, tenant_id: uuid.UUID, key: str) -> None:
    await s.execute(
        delete(IdempotencyKey).where(
            IdempotencyKey.tenant_id == tenant_id, IdempotencyKey.key == key, IdempotencyKey.status.is_(None)
        )
    )
