"""Forget's statements: which rows a selector (a user, a session, an entity, the whole namespace)
concerns in each table, archiving its memories and erasing it all. Every statement filters by
tenant and namespace; row-level security is the second lock.

A selector reaches namespace rows only: tenant- and system-wide memories belong to no user."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Delete, Select, Update, and_, delete, func, or_, select, text, true, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.orm import aliased

from memvault.entities.models import Entity, MemoryEntity, Relation
from memvault.events.models import ChatSession, Event
from memvault.memories.models import Memory
from memvault.traces.models import Trace

# Tables a hard forget deletes from; VACUUM then removes the dead rows from their indexes.
ERASED_TABLES = (
    "memories",
    "memory_history",
    "memory_entities",
    "events",
    "sessions",
    "traces",
    "trace_steps",
    "entities",
    "relations",
)
# Fixed names from the list above, never input: VACUUM takes no parameters.
_VACUUM = f"VACUUM (INDEX_CLEANUP ON) {', '.join(ERASED_TABLES)}"

# The DML here touches rows no session has loaded: nothing to synchronise.
_UNSYNCED = {"synchronize_session": False}


@dataclass(frozen=True)
class Selection:
    """What one forget names in one namespace: the rows of one user, session or entity (``by``:
    ``user_id``, ``session_id``, ``entity_id``; ``value``: whose), or ``all`` of them."""

    tenant_id: uuid.UUID
    namespace_id: uuid.UUID
    by: str
    value: Any = None


class NotSelectable(ValueError):
    """A table the selection cannot name rows of: a guard against erasing a whole table's share of
    the namespace by mistake (events have no entity; entities have no user)."""


async def _count(s: AsyncSession, dml: Update | Delete) -> int:
    """Run ``dml`` and count its rows in the database, not by fetching them."""
    done = dml.returning(true()).cte("done")
    return int(await s.scalar(select(func.count()).select_from(done), execution_options=_UNSYNCED) or 0)


def _in_namespace(model: Any, sel: Selection) -> list[Any]:
    return [model.tenant_id == sel.tenant_id, model.namespace_id == sel.namespace_id]


def _memories(sel: Selection) -> Select[Any]:
    """The ids of the memories the selection names (their current and past versions alike)."""
    q = select(Memory.id).where(*_in_namespace(Memory, sel))
    if sel.by == "user_id":
        return q.where(Memory.user_id == sel.value)
    if sel.by == "session_id":
        return q.where(Memory.session_id == sel.value)
    if sel.by == "entity_id":
        linked = select(MemoryEntity.memory_id).where(
            MemoryEntity.tenant_id == sel.tenant_id, MemoryEntity.entity_id == sel.value
        )
        return q.where(Memory.id.in_(linked))
    return q


def _narrowed(q: Delete, sel: Selection, **columns: Any) -> Delete:
    """``q`` limited to the selection by the column named for its kind (``user_id=Event.user_id``);
    a selection by a kind not named is refused rather than widened to the whole namespace."""
    if sel.by == "all":
        return q
    if sel.by not in columns:
        raise NotSelectable(f"{q.table} has no rows selected by {sel.by}")
    return q.where(columns[sel.by] == sel.value)


async def entity_exists(s: AsyncSession, sel: Selection) -> bool:
    found = await s.scalar(select(func.count()).where(*_in_namespace(Entity, sel), Entity.id == sel.value))
    return bool(found)


async def archive_memories(s: AsyncSession, sel: Selection) -> int:
    """Archive the selected memories still current and not archived yet; how many were."""
    return await _count(
        s,
        update(Memory)
        .where(
            Memory.tenant_id == sel.tenant_id,
            Memory.id.in_(_memories(sel)),
            Memory.state != "archived",
            Memory.superseded_at.is_(None),
        )
        .values(state="archived", updated_at=func.now()),
    )


async def erase_memories(s: AsyncSession, sel: Selection) -> int:
    """Delete the selected memories with every version of each, even one that no longer matches
    the selection (a superseded version written before an owner field changed). History and entity
    links go with them (their foreign keys cascade)."""
    chain = _memories(sel).cte("chain", recursive=True)
    m = aliased(Memory)
    chain = chain.union(
        select(m.id).join(
            chain, and_(m.tenant_id == sel.tenant_id, or_(m.superseded_by == chain.c.id, m.supersedes == chain.c.id))
        )
    )
    return await _count(s, delete(Memory).where(Memory.tenant_id == sel.tenant_id, Memory.id.in_(select(chain.c.id))))


async def erase_events(s: AsyncSession, sel: Selection) -> int:
    """A user's events are the ones naming them and every event of their sessions."""
    q = delete(Event).where(*_in_namespace(Event, sel))
    if sel.by == "user_id":
        sessions = select(ChatSession.id).where(*_in_namespace(ChatSession, sel), ChatSession.user_id == sel.value)
        return await _count(s, q.where(or_(Event.user_id == sel.value, Event.session_id.in_(sessions))))
    return await _count(s, _narrowed(q, sel, session_id=Event.session_id))


async def erase_sessions(s: AsyncSession, sel: Selection) -> int:
    q = delete(ChatSession).where(*_in_namespace(ChatSession, sel))
    return await _count(s, _narrowed(q, sel, user_id=ChatSession.user_id, session_id=ChatSession.id))


async def erase_traces(s: AsyncSession, sel: Selection) -> int:
    """Traces and (their foreign key cascades) their steps."""
    q = delete(Trace).where(*_in_namespace(Trace, sel))
    return await _count(s, _narrowed(q, sel, user_id=Trace.user_id, session_id=Trace.session_id))


async def erase_relations(s: AsyncSession, sel: Selection) -> int:
    """An entity's relations are those from it and those to it."""
    q = delete(Relation).where(*_in_namespace(Relation, sel))
    if sel.by == "entity_id":
        return await _count(s, q.where(or_(Relation.source_id == sel.value, Relation.target_id == sel.value)))
    return await _count(s, _narrowed(q, sel))


async def erase_entities(s: AsyncSession, sel: Selection) -> int:
    q = delete(Entity).where(*_in_namespace(Entity, sel))
    return await _count(s, _narrowed(q, sel, entity_id=Entity.id))


async def vacuum(conn: AsyncConnection) -> None:
    """Drop erased rows from the tables' indexes now. ``conn``: an owner connection in autocommit
    (VACUUM runs outside any transaction, and the app role owns no table)."""
    await conn.execute(text(_VACUUM))
