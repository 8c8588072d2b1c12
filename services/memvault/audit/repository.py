from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import insert, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.audit.models import AuditEntry


async def record(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    actor: str,
    action: str,
    *,
    namespace_id: uuid.UUID | None = None,
    target_id: str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    """Append to the audit log inside the caller's transaction: it commits or rolls back with the change.
    Never put memory content here; a hard delete must leave no copy."""
    await s.execute(
        insert(AuditEntry).values(
            tenant_id=tenant_id,
            actor=actor,
            action=action,
            namespace_id=namespace_id,
            target_id=target_id,
            detail=detail or {},
        )
    )


async def page(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    *,
    namespace_ids: list[uuid.UUID] | None,
    action: str | None,
    target_id: str | None,
    since: datetime | None,
    limit: int,
    before_id: int | None,
) -> list[AuditEntry]:
    """Newest first, keyset-paginated on the identity column (it only grows)."""
    stmt = select(AuditEntry).where(AuditEntry.tenant_id == tenant_id)
    if namespace_ids is not None:
        stmt = stmt.where(AuditEntry.namespace_id.in_(namespace_ids))
    if action is not None:
        # `memory` matches every memory.* action; `memory.create` only that one.
        stmt = stmt.where(or_(AuditEntry.action == action, AuditEntry.action.startswith(f"{action}.")))
    if target_id is not None:
        stmt = stmt.where(AuditEntry.target_id == target_id)
    if since is not None:
        stmt = stmt.where(AuditEntry.at >= since)
    if before_id is not None:
        stmt = stmt.where(AuditEntry.id < before_id)
    return list((await s.scalars(stmt.order_by(AuditEntry.id.desc()).limit(limit))).all())
