"""Invitations' persistence; always filtered by tenant_id as well as guarded by RLS."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.db.base import first_time
from memvault.db.pagination import newest_first
from memvault.members.models import Invitation


async def create(
    s: AsyncSession, tenant_id: uuid.UUID, *, email: str, role: str, invited_by: str, expires_at: datetime
) -> Invitation:
    row = await s.scalar(
        insert(Invitation)
        .values(tenant_id=tenant_id, email=email, role=role, invited_by=invited_by, expires_at=expires_at)
        .returning(Invitation)
    )
    assert row is not None
    return row


async def lock(s: AsyncSession, tenant_id: uuid.UUID, invitation_id: uuid.UUID) -> Invitation | None:
    """The invitation, locked: two acceptances of one link wait for each other, and one wins."""
    stmt = select(Invitation).where(Invitation.tenant_id == tenant_id, Invitation.id == invitation_id).with_for_update()
    return await s.scalar(stmt)


async def count_pending(s: AsyncSession, tenant_id: uuid.UUID) -> int:
    """Invitations that may still be accepted: each holds a place among the plan's members."""
    stmt = select(func.count()).where(
        Invitation.tenant_id == tenant_id,
        Invitation.accepted_at.is_(None),
        Invitation.revoked_at.is_(None),
        Invitation.expires_at > func.now(),
    )
    return int(await s.scalar(stmt) or 0)


async def mark_accepted(s: AsyncSession, tenant_id: uuid.UUID, invitation_id: uuid.UUID, user_id: uuid.UUID) -> None:
    await s.execute(
        update(Invitation)
        .where(Invitation.tenant_id == tenant_id, Invitation.id == invitation_id)
        .values(accepted_at=func.now(), user_id=user_id),
        execution_options={"synchronize_session": False},
    )


async def revoke(s: AsyncSession, tenant_id: uuid.UUID, invitation_id: uuid.UUID) -> Invitation | None:
    stmt = (
        update(Invitation)
        .where(Invitation.tenant_id == tenant_id, Invitation.id == invitation_id)
        .values(revoked_at=first_time(Invitation.revoked_at))
        .returning(Invitation)
    )
    return await s.scalar(stmt, execution_options={"synchronize_session": False, "populate_existing": True})


async def page(
    s: AsyncSession, tenant_id: uuid.UUID, *, pending_only: bool, limit: int, cursor: str | None
) -> tuple[list[Invitation], str | None]:
    stmt = select(Invitation).where(Invitation.tenant_id == tenant_id)
    if pending_only:
        stmt = stmt.where(
            Invitation.accepted_at.is_(None), Invitation.revoked_at.is_(None), Invitation.expires_at > func.now()
        )
    rows, next_cursor = await newest_first(s, stmt, Invitation.created_at, Invitation.id, limit=limit, cursor=cursor)
    return list(rows), next_cursor
