"""Every change to a memory row goes through here: its history entry and its webhook event are
written together, in the change's own transaction, so no path that changes a memory (a write, a
correction, a job's merge or decay, a contradiction's resolution) can record one without the other.
tests/test_architecture.py holds the history's writer to this module.

A deleted memory has no row left to take a history entry; its `memory.deleted` (the id alone) is
queued by the delete itself.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from memvault.db.session import TenantTx
from memvault.memories import repository as repo
from memvault.memories.models import Memory
from memvault.memories.schemas import MemoryOut
from memvault.webhooks import outbox

# The event subscribers see for each history action. A promotion changes the state (an update to
# them); a merge supersedes the duplicates and updates the memory they fold into.
EVENT = {
    "created": "memory.created",
    "updated": "memory.updated",
    "promoted": "memory.updated",
    "archived": "memory.archived",
    "superseded": "memory.superseded",
}


def event_of(action: str, m: Memory) -> str:
    if action == "merged":
        return "memory.superseded" if m.superseded_at is not None else "memory.updated"
    return EVENT[action]


def memory_out(m: Memory, namespace: str) -> MemoryOut:
    return MemoryOut(
        id=m.id,
        # Tenant- and system-scope memories belong to no namespace.
        namespace=namespace if m.namespace_id is not None else None,
        type=m.type,
        key=m.key,
        content=m.content,
        user_id=m.user_id,
        agent_id=m.agent_id,
        session_id=m.session_id,
        scope=m.scope,
        metadata=m.metadata_,
        importance=m.importance,
        confidence=m.confidence,
        state=m.state,
        valid_from=m.valid_from,
        valid_to=m.valid_to,
        recorded_at=m.recorded_at,
        superseded_at=m.superseded_at,
        superseded_by=m.superseded_by,
        supersedes=m.supersedes,
        source_event_ids=list(m.source_event_ids or []),
        embedding_model=m.embedding_model,
        content_hash=m.content_hash,
        access_count=m.access_count,
        last_accessed_at=m.last_accessed_at,
        created_by=m.created_by,
        created_at=m.created_at,
        updated_at=m.updated_at,
    )


def memory_event(event_type: str, m: Memory, ns: str) -> outbox.Event:
    """A memory's webhook event: the memory as REST returns it, in its namespace (None for a
    tenant- or system-scope memory: a tenant-wide event)."""
    out = memory_out(m, ns)
    return (event_type, out.namespace, out.model_dump(mode="json"))


def events_of(memories: Sequence[Memory], action: str, ns: str) -> list[outbox.Event]:
    return [memory_event(event_of(action, m), m, ns) for m in memories]


async def record(
    tx: TenantTx,
    tenant_id: uuid.UUID,
    actor: str,
    memories: Sequence[Memory],
    action: str,
    fields: list[str],
    ns: str,
    *,
    queue: list[outbox.Event] | None = None,
) -> None:
    """History entries for ``memories`` after ``action`` and their webhook events, queued now or,
    with ``queue``, appended to it for the caller's one insert of the whole batch's events."""
    if not memories:
        return
    await repo.record_history(tx.session, tenant_id, memories, action, actor, fields)
    events = events_of(memories, action, ns)
    if queue is not None:
        queue.extend(events)
    else:
        await outbox.emit_many(tx, tenant_id, events)
