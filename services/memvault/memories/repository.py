from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, delete, func, insert, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.errors import InvalidInput
from memvault.memories.models import Memory
from memvault.memories.schemas import MemoryFilters, MemoryState


def scope_conditions(tenant_id: uuid.UUID, namespace_id: uuid.UUID) -> list[ColumnElement[bool]]:
    return [Memory.tenant_id == tenant_id, Memory.namespace_id == namespace_id]


def filter_conditions(f: MemoryFilters | None) -> list[ColumnElement[bool]]:
    """Filters shared by list and search, all evaluated inside SQL."""
    f = f or MemoryFilters()
    conds: list[ColumnElement[bool]] = []
    if f.type:
        conds.append(Memory.type.in_([t.value for t in f.type]))
    for field in ("user_id", "agent_id", "session_id"):
        value = getattr(f, field)
        if value is not None:
            conds.append(getattr(Memory, field) == value)
    states = [s.value for s in f.state] if f.state else [MemoryState.tentative.value, MemoryState.stable.value]
    conds.append(Memory.state.in_(states))
    if f.metadata:
        conds.append(Memory.metadata_.contains(f.metadata))
    return conds


async def insert_many(s: AsyncSession, rows: list[dict[str, Any]]) -> list[Memory]:
    result = await s.scalars(insert(Memory).returning(Memory, sort_by_parameter_order=True), rows)
    return list(result.all())


async def get(s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, memory_id: uuid.UUID) -> Memory | None:
    return await s.scalar(select(Memory).where(*scope_conditions(tenant_id, namespace_id), Memory.id == memory_id))


def encode_cursor(m: Memory) -> str:
    raw = json.dumps([m.created_at.isoformat(), str(m.id)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        at, mid = json.loads(raw)
        return datetime.fromisoformat(at), uuid.UUID(mid)
    except (ValueError, TypeError) as exc:
        raise InvalidInput("cursor is not one this API returned", extra={"field": "cursor"}) from exc


async def page(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    filters: MemoryFilters | None,
    *,
    limit: int,
    cursor: str | None,
) -> tuple[list[Memory], str | None]:
    """Newest first, keyset-paginated on (created_at, id) so pages never skip or repeat rows."""
    stmt = select(Memory).where(*scope_conditions(tenant_id, namespace_id), *filter_conditions(filters))
    if cursor:
        at, mid = decode_cursor(cursor)
        stmt = stmt.where(tuple_(Memory.created_at, Memory.id) < tuple_(at, mid))
    stmt = stmt.order_by(Memory.created_at.desc(), Memory.id.desc()).limit(limit + 1)
    rows = list((await s.scalars(stmt)).all())
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (encode_cursor(rows[-1]) if more and rows else None)


async def update_fields(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, memory_id: uuid.UUID, values: dict[str, Any]
) -> Memory | None:
    stmt = (
        update(Memory)
        .where(*scope_conditions(tenant_id, namespace_id), Memory.id == memory_id)
        .values(**values, updated_at=func.now())
        .returning(Memory)
    )
    # populate_existing: the caller may already hold this row (read to check it); without it the
    # session hands back that stale object instead of the values the UPDATE returned.
    return await s.scalar(stmt, execution_options={"synchronize_session": False, "populate_existing": True})


async def remove(s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, memory_id: uuid.UUID) -> bool:
    stmt = delete(Memory).where(*scope_conditions(tenant_id, namespace_id), Memory.id == memory_id).returning(Memory.id)
    return (await s.scalar(stmt)) is not None


async def get_and_touch(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, memory_id: uuid.UUID
) -> Memory | None:
    stmt = (
        update(Memory)
        .where(*scope_conditions(tenant_id, namespace_id), Memory.id == memory_id)
        .values(access_count=Memory.access_count + 1, last_accessed_at=func.now())
        .returning(Memory)
    )
    return await s.scalar(stmt, execution_options={"synchronize_session": False, "populate_existing": True})


async def touch(s: AsyncSession, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> None:
    """Count an access: recall frequency and recency feed ranking and decay."""
    if not ids:
        return
    await s.execute(
        update(Memory)
        .where(Memory.tenant_id == tenant_id, Memory.id.in_(list(ids)))
        .values(access_count=Memory.access_count + 1, last_accessed_at=func.now()),
        execution_options={"synchronize_session": False},
    )
