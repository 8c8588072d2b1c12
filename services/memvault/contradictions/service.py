"""The contradiction part of the facade: mark two memories as contradicting each other, list the
marks, resolve them; search shows the open ones on its hits (``open_against``)."""

from __future__ import annotations

import uuid

from memvault.contradictions import repository as repo
from memvault.contradictions.models import Contradiction
from memvault.contradictions.schemas import (
    ContradictionIn,
    ContradictionOut,
    ContradictionPage,
    ContradictionState,
    PairResolutionIn,
    Resolution,
)
from memvault.db.session import TenantTx
from memvault.errors import Conflict, InvalidInput, NotFound
from memvault.facade import FacadeBase
from memvault.memories import changes
from memvault.memories import repository as memories_repo
from memvault.memories.models import Memory
from memvault.memories.schemas import MemoryState
from memvault.memories.service import MemoryNotFound, _may_write_level
from memvault.operations import operation
from memvault.principal import Principal


class ContradictionNotFound(NotFound):
    code = "contradiction_not_found"
    title = "Contradiction not found"


class ContradictionResolved(Conflict):
    code = "contradiction_resolved"
    title = "Contradiction resolved"


def contradiction_out(c: Contradiction, namespace: str) -> ContradictionOut:
    return ContradictionOut(
        id=c.id,
        namespace=namespace,
        memory_id=c.memory_id,
        other_id=c.other_id,
        note=c.note,
        state=ContradictionState(c.state),
        resolution=Resolution(c.resolution) if c.resolution else None,
        kept_id=c.kept_id,
        resolution_note=c.resolution_note,
        created_by=c.created_by,
        created_at=c.created_at,
        resolved_by=c.resolved_by,
        resolved_at=c.resolved_at,
    )


class ContradictionOps(FacadeBase):
    async def _reach(
        self, tx: TenantTx, p: Principal, namespace_id: uuid.UUID, ns: str, memory_id: uuid.UUID, *, lock: bool = False
    ) -> Memory:
        """A memory of the caller's tenant reached through this namespace (its own or the tenant's
        shared ones; for a signed-in member, never another member's: Principal.reader). System
        memories belong to no tenant: they cannot be marked."""
        m = await memories_repo.get(tx.session, p.tenant_id, namespace_id, memory_id, lock=lock, reader=p.reader)
        if m is None:
            raise MemoryNotFound(f"No memory {memory_id} in namespace '{ns}'.")
        return m

    @operation("write")
    async def mark_contradiction(self, p: Principal, ns: str, body: ContradictionIn) -> ContradictionOut:
        """Record that two memories contradict each other. Until resolved, search shows each on
        the other's hits (`contradicted_by`). Marking an open pair again returns its mark."""
        async with self._open(p, ns, "write") as (tx, namespace):
            for memory_id in (body.memory_id, body.other_id):
                await self._reach(tx, p, namespace.id, ns, memory_id)
            c, created = await repo.insert_open(
                tx.session, p.tenant_id, namespace.id, body.memory_id, body.other_id, body.note, p.subject
            )
            if created:
                await self._audit(
                    tx,
                    p,
                    "contradiction.mark",
                    namespace_id=namespace.id,
                    target_id=str(c.id),
                    detail={"memory_id": str(c.memory_id), "other_id": str(c.other_id)},
                )
        return contradiction_out(c, ns)

    @operation("read")
    async def list_contradictions(
        self,
        p: Principal,
        ns: str,
        *,
        state: ContradictionState | None = None,
        memory_id: uuid.UUID | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> ContradictionPage:
        """Contradictions marked in this namespace, newest first; `state` open or resolved,
        `memory_id` on either side."""
        async with self._open(p, ns, "read") as (tx, namespace):
            rows, next_cursor = await repo.page(
                tx.session,
                p.tenant_id,
                namespace.id,
                state=state.value if state else None,
                memory_id=memory_id,
                limit=limit,
                cursor=cursor,
            )
            if p.reader is not None:
                # A signed-in member sees the pairs whose two memories are there for them.
                rows = [c for c in rows if await self._sees_pair(tx, p, namespace.id, c)]
        return ContradictionPage(data=[contradiction_out(c, ns) for c in rows], next_cursor=next_cursor)

    async def _sees_pair(self, tx: TenantTx, p: Principal, namespace_id: uuid.UUID, c: Contradiction) -> bool:
        for memory_id in (c.memory_id, c.other_id):
            if await memories_repo.get(tx.session, p.tenant_id, namespace_id, memory_id, reader=p.reader) is None:
                return False
        return True

    @operation("write")
    async def resolve_contradiction(self, p: Principal, ns: str, body: PairResolutionIn) -> ContradictionOut:
        """End a contradiction, named by its id or by its two memories. `keep_one` archives the
        memory not kept (recoverable: it stays in history); `keep_both` and `note` change no memory."""
        async with self._open(p, ns, "write") as (tx, namespace):
            if body.contradiction_id is not None:
                c = await repo.get(tx.session, p.tenant_id, namespace.id, body.contradiction_id, lock=True)
                if c is None or not await self._sees_pair(tx, p, namespace.id, c):
                    raise ContradictionNotFound(f"No contradiction {body.contradiction_id} in namespace '{ns}'.")
            else:
                assert body.memory_id is not None and body.other_id is not None  # the schema's rule
                for memory_id in (body.memory_id, body.other_id):
                    await self._reach(tx, p, namespace.id, ns, memory_id)
                found = await repo.open_for_pair(tx.session, p.tenant_id, body.memory_id, body.other_id, lock=True)
                if found is None or found.namespace_id != namespace.id:
                    raise ContradictionNotFound(
                        f"No open contradiction between {body.memory_id} and {body.other_id} in namespace '{ns}'."
                    )
                c = found
            if c.state != ContradictionState.open:
                if _same(c, body):
                    return contradiction_out(c, ns)
                raise ContradictionResolved(f"Contradiction {c.id} was already resolved ({c.resolution}).")
            archived: uuid.UUID | None = None
            if body.resolution is Resolution.keep_one:
                if body.keep_id not in (c.memory_id, c.other_id):
                    raise InvalidInput("keep_id must be one of the two memories", extra={"field": "keep_id"})
                archived = c.other_id if body.keep_id == c.memory_id else c.memory_id
                await self._archive(tx, p, namespace.id, ns, archived)
            c = await repo.resolve(
                tx.session,
                p.tenant_id,
                c.id,
                {
                    "resolution": body.resolution.value,
                    "kept_id": body.keep_id,
                    "resolution_note": body.note,
                    "resolved_by": p.subject,
                },
            )
            await self._audit(
                tx,
                p,
                "contradiction.resolve",
                namespace_id=namespace.id,
                target_id=str(c.id),
                detail={"resolution": body.resolution.value, **({"archived": str(archived)} if archived else {})},
            )
        return contradiction_out(c, ns)

    async def _archive(
        self, tx: TenantTx, p: Principal, namespace_id: uuid.UUID, ns: str, memory_id: uuid.UUID
    ) -> None:
        """Archive the memory not kept, in the resolution's own transaction, with the same rules
        and records as archive_memory."""
        m = await self._reach(tx, p, namespace_id, ns, memory_id, lock=True)
        _may_write_level(p, m.scope)
        if m.state == MemoryState.archived:
            return
        m = await memories_repo.update_fields(tx.session, p.tenant_id, m.id, {"state": MemoryState.archived.value})
        await changes.record(tx, p.tenant_id, p.subject, [m], "archived", ["state"], ns)
        await self._audit(
            tx, p, "memory.archive", namespace_id=m.namespace_id, target_id=str(m.id), detail={"fields": ["state"]}
        )


def _same(c: Contradiction, body: PairResolutionIn) -> bool:
    """Whether a resolved mark was resolved the way ``body`` asks (a retried call)."""
    return c.resolution == body.resolution.value and c.kept_id == body.keep_id
