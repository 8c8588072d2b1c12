from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import insert, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.audit.models import AuditEntry
from memvault.namespaces.models import Namespace
from memvault.oauth.models import OAuthUser


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
    actor: str | None = None,
    until: datetime | None = None,
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
    if actor is not None:
        stmt = stmt.where(AuditEntry.actor == actor)
    if since is not None:
        stmt = stmt.where(AuditEntry.at >= since)
    if until is not None:
        stmt = stmt.where(AuditEntry.at < until)
    if before_id is not None:
        stmt = stmt.where(AuditEntry.id < before_id)
    return list((await s.scalars(stmt.order_by(AuditEntry.id.desc()).limit(limit))).all())


async def namespace_names(s: AsyncSession, tenant_id: uuid.UUID) -> dict[uuid.UUID, str]:
    """Id -> name of the tenant's namespaces, to name each entry's (no memory counts: not needed)."""
    rows = await s.execute(select(Namespace.id, Namespace.name).where(Namespace.tenant_id == tenant_id))
    return {ns_id: name for ns_id, name in rows.all()}


async def user_emails(s: AsyncSession, tenant_id: uuid.UUID, user_ids: set[uuid.UUID]) -> dict[uuid.UUID, str]:
    """Id -> email of those of ``user_ids`` that are (still) members of the tenant."""
    if not user_ids:
        return {}
    rows = await s.execute(
        select(OAuthUser.id, OAuthUser.email).where(OAuthUser.tenant_id == tenant_id, OAuthUser.id.in_(user_ids))
    )
    return {user_id: email for user_id, email in rows.all()}
