"""Dashboard sessions' persistence; always filtered by tenant_id as well as guarded by RLS, except
the lookup by token hash, which runs before the tenant is known (a SECURITY DEFINER function)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.websessions.models import WebSession


@dataclass(frozen=True)
class FoundSession:
    tenant_id: uuid.UUID
    id: uuid.UUID
    user_id: uuid.UUID


async def find(s: AsyncSession, token_hash: bytes) -> FoundSession | None:
    """A live session (not ended, not expired) by its token's hash."""
    row = (await s.execute(text("SELECT * FROM memvault_find_web_session(:h)"), {"h": token_hash})).mappings().first()
    return FoundSession(**row) if row else None


async def create(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    *,
    user_id: uuid.UUID,
    token_hash: bytes,
    expires_at: datetime,
    address: str | None,
    user_agent: str | None,
) -> WebSession:
    row = await s.scalar(
        insert(WebSession)
        .values(
            tenant_id=tenant_id,
            user_id=user_id,
            token_hash=token_hash,
            expires_at=expires_at,
            address=address,
            user_agent=user_agent,
        )
        .returning(WebSession)
    )
    assert row is not None
    return row


async def get(s: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID) -> WebSession | None:
    return await s.scalar(select(WebSession).where(WebSession.tenant_id == tenant_id, WebSession.id == session_id))


async def touch(s: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID, *, expires_at: datetime) -> None:
    await s.execute(
        update(WebSession)
        .where(WebSession.tenant_id == tenant_id, WebSession.id == session_id)
        .values(last_seen_at=func.now(), expires_at=expires_at)
    )


async def end(s: AsyncSession, tenant_id: uuid.UUID, session_id: uuid.UUID) -> None:
    await s.execute(
        update(WebSession)
        .where(WebSession.tenant_id == tenant_id, WebSession.id == session_id, WebSession.ended_at.is_(None))
        .values(ended_at=func.now())
    )


async def end_all_of(s: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID) -> None:
    """End every live session of a user (their password changed)."""
    await s.execute(
        update(WebSession)
        .where(WebSession.tenant_id == tenant_id, WebSession.user_id == user_id, WebSession.ended_at.is_(None))
        .values(ended_at=func.now())
    )
