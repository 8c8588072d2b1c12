"""A memory's rows: read by id or listed, inserted, versioned (the current version under a key,
its supersession, the version chain), changed, counted when read, deleted; and the history entries
written beside each change (memories/changes.py). The conditions every read applies are in
memories/reads_repository.py."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ARRAY, DateTime, Integer, bindparam, delete, func, insert, select, text, update
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.db.pagination import newest_first_of
from memvault.db.session import reading_as_system, system_apart
from memvault.memories import reads_repository as reads
from memvault.memories import split
from memvault.memories.models import Memory, MemoryHistoryEntry
from memvault.memories.schemas import MemoryFilters
from memvault.principal import SYSTEM_TENANT_ID


def owner_of(scope: str, user_id: str | None, session_id: str | None) -> str:
    """The owner a key is unique under at this scope level (see uq_memories_current_key)."""
    return (session_id if scope == "session" else user_id if scope == "user" else None) or ""


async def current_for_key(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID | None,
    *,
    scope: str,
    owner: str,
    type: str,
    key: str,
) -> Memory | None:
    """The current memory under (scope, owner, type, key), locked until the transaction ends.

    A transaction-scoped advisory lock on the key comes first: concurrent writers of one key
    queue here instead of all inserting and all but one failing on uq_memories_current_key."""
    lock_name = f"memvault:key:{tenant_id}:{namespace_id}:{scope}:{owner}:{type}:{key}"
    await s.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"), {"k": lock_name})
    owner_col = Memory.session_id if scope == "session" else Memory.user_id if scope == "user" else None
    stmt = select(Memory).where(
        Memory.tenant_id == tenant_id,
        Memory.namespace_id == namespace_id if namespace_id is not None else Memory.namespace_id.is_(None),
        Memory.scope == scope,
        Memory.type == type,
        Memory.key == key,
        Memory.superseded_at.is_(None),
    )
    if owner_col is not None:
        stmt = stmt.where(owner_col == owner)
    return await s.scalar(stmt.with_for_update())


async def supersede(
    s: AsyncSession, tenant_id: uuid.UUID, old: Memory, new_id: uuid.UUID, valid_to: datetime | None
) -> Memory:
    # What the new version says became true then stopped being true of the old one, unless the
    # writer already bounded the old one's valid time. Chosen here rather than with coalesce() in
    # the statement: ``old`` is locked (current_for_key), and Citus refuses a function that is not
    # immutable inside COALESCE (issue 26).
    ends: Any = old.valid_to or valid_to or func.statement_timestamp()
    stmt = (
        update(Memory)
        .where(Memory.tenant_id == tenant_id, Memory.id == old.id)
        .values(
            # The statement's time, later than every earlier statement of the transaction (the
            # new version's insert among them), as clock_timestamp() was; but stable, which Citus
            # requires of a function in an UPDATE of a distributed table.
            superseded_at=func.statement_timestamp(),
            superseded_by=new_id,
            valid_to=ends,
            updated_at=func.now(),
        )
        .returning(Memory)
    )
    result = await s.scalar(stmt, execution_options={"synchronize_session": False, "populate_existing": True})
    assert result is not None
    return result


SNAPSHOT_FIELDS = (
    "content",
    "type",
    "key",
    "scope",
    "state",
    "user_id",
    "agent_id",
    "session_id",
    "importance",
    "confidence",
    "valid_from",
    "valid_to",
    "superseded_at",
    "superseded_by",
)


def snapshot(m: Memory) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in SNAPSHOT_FIELDS:
        value = getattr(m, name)
        out[name] = (
            value.isoformat() if isinstance(value, datetime) else str(value) if isinstance(value, uuid.UUID) else value
        )
    out["metadata"] = m.metadata_
    return out


async def record_history(
    s: AsyncSession, tenant_id: uuid.UUID, memories: Sequence[Memory], action: str, actor: str, fields: list[str]
) -> None:
    if not memories:
        return
    await s.execute(
        insert(MemoryHistoryEntry),
        [
            {
                "tenant_id": tenant_id,
                "memory_id": m.id,
                "action": action,
                "actor": actor,
                "changed_fields": fields,
                "snapshot": snapshot(m),
            }
            for m in memories
        ],
    )


async def version_chain(s: AsyncSession, tenant_id: uuid.UUID, memory_id: uuid.UUID) -> list[Memory]:
    """Every version linked to this one by supersession, oldest first, found by one recursive query.

    A link counts only when both ends name each other: a duplicate merged into another memory
    points at it with superseded_by, but that memory is not a version of the duplicate."""
    chain = text(
        """
        WITH RECURSIVE back(id, depth) AS (
            SELECT id, 0 FROM memories WHERE tenant_id = :t AND id = :m
            UNION
            SELECT prev.id, b.depth + 1
            FROM back b
            JOIN memories cur ON cur.tenant_id = :t AND cur.id = b.id
            JOIN memories prev ON prev.tenant_id = :t AND prev.id = cur.supersedes AND prev.superseded_by = cur.id
            WHERE b.depth < 10000
        ), fwd(id, depth) AS (
            SELECT id, 0 FROM memories WHERE tenant_id = :t AND id = :m
            UNION
            SELECT nxt.id, f.depth + 1
            FROM fwd f
            JOIN memories cur ON cur.tenant_id = :t AND cur.id = f.id
            JOIN memories nxt ON nxt.tenant_id = :t AND nxt.id = cur.superseded_by AND nxt.supersedes = cur.id
            WHERE f.depth < 10000
        )
        SELECT id FROM back UNION SELECT id FROM fwd
        """
    ).columns(id=UUID(as_uuid=True))
    ids = list((await s.scalars(chain, {"t": tenant_id, "m": memory_id})).all())
    if not ids:
        return []
    rows = await s.scalars(
        select(Memory).where(Memory.tenant_id == tenant_id, Memory.id.in_(ids)).order_by(Memory.recorded_at, Memory.id)
    )
    return list(rows.all())


async def merged_into(s: AsyncSession, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    """Rows superseded by any of ``ids``: earlier versions, and duplicates merged into them."""
    rows = await s.scalars(select(Memory.id).where(Memory.tenant_id == tenant_id, Memory.superseded_by.in_(list(ids))))
    return list(rows.all())


async def history_entries(s: AsyncSession, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> list[MemoryHistoryEntry]:
    rows = await s.scalars(
        select(MemoryHistoryEntry)
        .where(MemoryHistoryEntry.tenant_id == tenant_id, MemoryHistoryEntry.memory_id.in_(list(ids)))
        .order_by(MemoryHistoryEntry.id)
    )
    return list(rows.all())


async def insert_many(s: AsyncSession, rows: list[dict[str, Any]]) -> list[Memory]:
    result = await s.scalars(insert(Memory).returning(Memory, sort_by_parameter_order=True), rows)
    return list(result.all())


async def get(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID | None,
    memory_id: uuid.UUID,
    *,
    lock: bool = False,
    reader: str | None = None,
) -> Memory | None:
    stmt = select(Memory).where(*reads.scope_conditions(tenant_id, namespace_id, reader), Memory.id == memory_id)
    if lock:
        stmt = stmt.with_for_update()
    return await s.scalar(stmt, execution_options={"populate_existing": True})


async def get_system(s: AsyncSession, memory_id: uuid.UUID) -> Memory | None:
    """A system-scope memory, which every tenant may read (RLS policy system_read)."""
    return await s.scalar(
        select(Memory).where(Memory.tenant_id == SYSTEM_TENANT_ID, Memory.scope == "system", Memory.id == memory_id)
    )


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
    branches = reads.read_branches(tenant_id, namespace_id, filters)
    rows, next_cursor = await newest_first_of(s, Memory, branches, limit=limit, cursor=cursor)
    if system_apart() and await reads.system_shared(s):
        # On Citus: the system tenant's shared rows from their own shard (memories/split.py).
        async with reading_as_system(s, tenant_id):
            shared_branches = reads.read_branches(SYSTEM_TENANT_ID, namespace_id, filters)
            shared, more = await newest_first_of(s, Memory, shared_branches, limit=limit, cursor=cursor)
        shown = await reads.unshadowed(s, tenant_id, namespace_id, filters, shared, lambda m: m)
        return split.merge_pages(rows, shown, limit, next_cursor is not None or more is not None)
    return list(rows), next_cursor


async def update_fields(s: AsyncSession, tenant_id: uuid.UUID, memory_id: uuid.UUID, values: dict[str, Any]) -> Memory:
    stmt = (
        update(Memory)
        .where(Memory.tenant_id == tenant_id, Memory.id == memory_id)
        .values(**values, updated_at=func.now())
        .returning(Memory)
    )
    # populate_existing: the caller may already hold this row (read to check it); without it the
    # session hands back that stale object instead of the values the UPDATE returned.
    m = await s.scalar(stmt, execution_options={"synchronize_session": False, "populate_existing": True})
    assert m is not None  # the caller holds the row locked
    return m


async def remove_ids(s: AsyncSession, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> int:
    """Delete rows for good; their history and entity links go with them (ON DELETE CASCADE)."""
    stmt = delete(Memory).where(Memory.tenant_id == tenant_id, Memory.id.in_(list(ids))).returning(Memory.id)
    return len((await s.scalars(stmt)).all())


async def get_and_touch(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    memory_id: uuid.UUID,
    *,
    accesses: int = 1,
    reader: str | None = None,
) -> Memory | None:
    """The memory, counting ``accesses`` (this read and any not yet written, memories/access.py)."""
    stmt = (
        update(Memory)
        .where(*reads.scope_conditions(tenant_id, namespace_id, reader), Memory.id == memory_id)
        .values(access_count=Memory.access_count + accesses, last_accessed_at=func.now())
        .returning(Memory)
    )
    return await s.scalar(stmt, execution_options={"synchronize_session": False, "populate_existing": True})


async def count_accesses(
    s: AsyncSession, tenant_id: uuid.UUID, accesses: Sequence[tuple[uuid.UUID, int, datetime]]
) -> None:
    """Add (memory id, accesses, time of the last) to the memories' counts, in one statement. A
    memory deleted since is skipped."""
    if not accesses:
        return
    ids, counts, lasts = (list(column) for column in zip(*accesses, strict=True))
    found = (
        func.unnest(
            bindparam("ids", ids, type_=ARRAY(UUID(as_uuid=True))),
            bindparam("counts", counts, type_=ARRAY(Integer)),
            bindparam("lasts", lasts, type_=ARRAY(DateTime(timezone=True))),
        )
        .table_valued("id", "count", "last")
        .render_derived(name="accessed")
    )
    await s.execute(
        update(Memory)
        .where(Memory.tenant_id == tenant_id, Memory.id == found.c.id)
        .values(
            access_count=Memory.access_count + found.c.count,
            last_accessed_at=func.greatest(Memory.last_accessed_at, found.c.last),
        ),
        execution_options={"synchronize_session": False},
    )
