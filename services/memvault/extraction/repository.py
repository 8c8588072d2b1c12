"""Queries of the extraction job. Every function filters by tenant and namespace explicitly."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.entities.models import Entity
from memvault.events.models import Event
from memvault.memories.models import Memory


async def events_by_ids(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, ids: Sequence[uuid.UUID]
) -> list[Event]:
    """The events in conversation order (message time, then arrival)."""
    rows = await s.scalars(
        select(Event)
        .where(Event.tenant_id == tenant_id, Event.namespace_id == namespace_id, Event.id.in_(list(ids)))
        .order_by(Event.occurred_at, Event.seq)
    )
    return list(rows.all())


async def extracted_event_ids(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, ids: Sequence[uuid.UUID]
) -> set[uuid.UUID]:
    """Those of ``ids`` that some memory of the namespace (any version, any state) already cites:
    their extraction committed, so a re-run skips them (uses ix_memories_source_events)."""
    if not ids:
        return set()
    # Cast coerces the list into one bound parameter; its stubs accept only SQL expressions.
    wanted = func.cast(list(ids), ARRAY(UUID(as_uuid=True)))  # type: ignore[arg-type]
    stmt = select(func.unnest(Memory.source_event_ids)).where(
        Memory.tenant_id == tenant_id,
        Memory.namespace_id == namespace_id,
        Memory.source_event_ids.overlap(wanted),
    )
    return set((await s.scalars(stmt)).all()) & set(ids)


async def entities_by_name(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, names: Sequence[str]
) -> dict[str, Entity]:
    """Existing entities by lower-cased name, whatever their type (the oldest wins a tie)."""
    if not names:
        return {}
    rows = await s.scalars(
        select(Entity)
        .where(
            Entity.tenant_id == tenant_id,
            Entity.namespace_id == namespace_id,
            func.lower(Entity.name).in_([n.lower() for n in names]),
        )
        .order_by(Entity.created_at.desc())
    )
    return {e.name.lower(): e for e in rows.all()}


async def current_by_hash(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, hashes: Sequence[str]
) -> list[Memory]:
    """Current, not archived memories of the namespace with these content hashes."""
    if not hashes:
        return []
    rows = await s.scalars(
        select(Memory)
        .where(
            Memory.tenant_id == tenant_id,
            Memory.namespace_id == namespace_id,
            Memory.content_hash.in_(list(hashes)),
            Memory.superseded_at.is_(None),
            Memory.state != "archived",
        )
        .with_for_update()
    )
    return list(rows.all())


async def reinforce(
    s: AsyncSession, tenant_id: uuid.UUID, memory: Memory, event_ids: Sequence[uuid.UUID], extra: dict[str, Any]
) -> Memory:
    """Count another mention of a memory: cite the new events, bump metadata.mentions."""
    cited = list(dict.fromkeys([*memory.source_event_ids, *event_ids]))
    metadata = {**memory.metadata_, **extra, "mentions": int(memory.metadata_.get("mentions", 1)) + 1}
    m = await s.scalar(
        update(Memory)
        .where(Memory.tenant_id == tenant_id, Memory.id == memory.id)
        .values(source_event_ids=cited, metadata_=metadata, updated_at=func.now())
        .returning(Memory),
        execution_options={"synchronize_session": False, "populate_existing": True},
    )
    assert m is not None  # locked by current_by_hash
    return m
