from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import insert
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
