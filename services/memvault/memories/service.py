"""The memory part of the facade: write with supersession by key, read through the scope chain,
history, lifecycle. NamespaceAPI inherits it; nothing else opens these transactions."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from sqlalchemy.exc import IntegrityError

from memvault.audit import repository as audit
from memvault.db.session import TenantTx
from memvault.errors import Conflict, Forbidden, InvalidInput, NotFound
from memvault.facade import FacadeBase
from memvault.memories import changes
from memvault.memories import repository as repo
from memvault.memories.changes import memory_out
from memvault.memories.models import Memory
from memvault.memories.schemas import (
    MemoryChange,
    MemoryFilters,
    MemoryHistory,
    MemoryIn,
    MemoryOut,
    MemoryPage,
    MemoryPatch,
    MemoryState,
    ScopeLevel,
)
from memvault.metering.tally import count, estimated_tokens
from memvault.operations import operation
from memvault.plans.limits import UNLIMITED
from memvault.plans.room import require_stored_room
from memvault.principal import OPERATOR, SYSTEM_TENANT_ID, Principal
from memvault.webhooks import outbox

T = TypeVar("T")

# A concurrent writer of the same key makes our insert fail on uq_memories_current_key; the
# retry then sees its row and supersedes it. More than a few rounds means something else is wrong.
KEY_RACE_RETRIES = 3


AUDIT_ACTION = {"updated": "memory.update", "promoted": "memory.promote", "archived": "memory.archive"}


class MemoryNotFound(NotFound):
    code = "memory_not_found"
    title = "Memory not found"


class MemorySuperseded(Conflict):
    code = "memory_superseded"
    title = "Memory superseded"


class KeyConflict(Conflict):
    code = "key_conflict"
    title = "Key in use"


_WS = re.compile(r"\s+")


def content_hash(content: str) -> str:
    """Hash of the normalised text: case and whitespace differences are the same memory."""
    return hashlib.sha256(_WS.sub(" ", content.strip().lower()).encode()).hexdigest()


def _is_key_race(exc: IntegrityError) -> bool:
    return "uq_memories_current_key" in str(exc.orig)


def _may_write_level(p: Principal, level: str) -> None:
    if level == ScopeLevel.tenant:
        p.require("admin")
        if not p.unrestricted:
            raise Forbidden("Tenant-scope memories reach every namespace; a namespace-limited key cannot write them.")
    elif level == ScopeLevel.system and not p.has(OPERATOR):
        raise Forbidden("System-scope memories reach every tenant; only an operator key can write them.")


class MemoryOps(FacadeBase):
    async def _embed(self, p: Principal, texts: list[str]) -> list[list[float]]:
        await self._usage.require_monthly_room(p.tenant_id, "embedded_tokens_per_month", adding=estimated_tokens(texts))
        return await self._embedder.embed(texts, tenant=p.tenant_id)

    def _row(self, p: Principal, namespace_id: uuid.UUID | None, body: MemoryIn, vector: list[float]) -> dict[str, Any]:
        return {
            "id": uuid.uuid4(),
            "tenant_id": SYSTEM_TENANT_ID if body.level is ScopeLevel.system else p.tenant_id,
            "namespace_id": None if body.level in (ScopeLevel.tenant, ScopeLevel.system) else namespace_id,
            "type": body.type.value,
            "key": body.key,
            "content": body.content,
            "scope": body.level.value,
            "user_id": body.user_id,
            "agent_id": body.agent_id,
            "session_id": body.session_id,
            "metadata_": body.metadata,
            "importance": body.importance,
            "confidence": body.confidence,
            "state": body.state.value,
            "valid_from": body.valid_from,
            "valid_to": body.valid_to,
            "source_event_ids": body.source_event_ids,
            "embedding": vector,
            "embedding_model": self._embedder.model_id,
            "content_hash": content_hash(body.content),
            "created_by": p.subject,
        }

    @operation("write")
    async def store(self, p: Principal, ns: str, body: MemoryIn) -> MemoryOut:
        """Store one memory. With a `key`, it supersedes the current memory of the same scope,
        owner, type and key (which stays readable in history and at earlier `knowledge_at`)."""
        return (await self.store_many(p, ns, [body]))[0]

    @operation("write")
    async def store_many(self, p: Principal, ns: str, bodies: list[MemoryIn]) -> list[MemoryOut]:
        """Store memories in one embedding batch and one transaction: all of them or none."""
        p.require("write", ns)
        for b in bodies:
            if b.level is ScopeLevel.user and not b.user_id:
                # Left open by MemoryIn for a signed-in caller, whose user the binding filled in.
                raise InvalidInput("scope 'user' needs a user_id", extra={"field": "user_id"})
        levels = {b.level for b in bodies}
        for level in levels:
            _may_write_level(p, level)
        if ScopeLevel.system in levels and len(levels) > 1:
            raise InvalidInput(
                "system-scope memories are stored apart from every tenant: send them in their own batch",
                extra={"field": "scope"},
            )
        write_tenant = SYSTEM_TENANT_ID if ScopeLevel.system in levels else p.tenant_id
        # System-scope memories belong to no tenant's plan.
        limits = (await self._plans.of(p.tenant_id)).limits if write_tenant == p.tenant_id else UNLIMITED
        async with self._db.tenant_tx(p.tenant_id) as tx:
            namespace = await self._namespace(tx, p, ns)
            # A batch past the cap is refused before the model spends any time on it.
            await require_stored_room(tx, limits, "memories", adding=len(bodies), hold=False)
        # Embed before the write's transaction opens, so no connection waits on the model.
        vectors = await self._embed(p, [b.content for b in bodies])
        rows = [self._row(p, namespace.id, b, v) for b, v in zip(bodies, vectors, strict=True)]
        for attempt in range(KEY_RACE_RETRIES):
            try:
                async with self._db.tenant_tx(write_tenant) as tx:
                    # Counted before the write under the quota lock; a keyed rewrite of the same
                    # statement adds nothing, so a crossing may be announced a little early.
                    await require_stored_room(tx, limits, "memories", adding=len(rows))
                    events: list[outbox.Event] = []
                    created = await self._write(tx, p, rows, bodies, ns, events)
                    await outbox.emit_many(tx, write_tenant, events)
                    await self._link_entities(tx, namespace.id, created, bodies)
                    await audit.record(
                        tx.session,
                        write_tenant,
                        p.subject,
                        "memory.create",
                        namespace_id=namespace.id if write_tenant == p.tenant_id else None,
                        target_id=str(created[0].id) if len(created) == 1 else None,
                        detail={"count": len(created)} if len(created) > 1 else {},
                    )
                break
            except IntegrityError as exc:
                if not _is_key_race(exc) or attempt == KEY_RACE_RETRIES - 1:
                    raise
                # Fresh ids: the failed transaction's never existed.
                for row in rows:
                    row["id"] = uuid.uuid4()
        count(memories_written=len(created), bytes_stored=sum(len(b.content.encode()) for b in bodies))
        return [memory_out(m, ns) for m in created]

    async def _link_entities(
        self, tx: TenantTx, namespace_id: uuid.UUID, created: list[Memory], bodies: list[MemoryIn]
    ) -> None:
        from memvault.entities import repository as entities_repo

        for m, b in zip(created, bodies, strict=True):
            if b.entity_ids or b.entity_names:
                if m.namespace_id is None:
                    raise InvalidInput(
                        "entities belong to a namespace; only namespace, user and session memories link to them",
                        extra={"field": "entity_ids" if b.entity_ids else "entity_names"},
                    )
                named = [
                    (await entities_repo.resolve(tx.session, m.tenant_id, namespace_id, name, field="entity_names")).id
                    for name in b.entity_names
                ]
                await entities_repo.link_memories(tx.session, m.tenant_id, namespace_id, m.id, [*b.entity_ids, *named])

    async def _write(
        self,
        tx: TenantTx,
        p: Principal,
        rows: list[dict[str, Any]],
        bodies: list[MemoryIn],
        ns: str,
        events: list[outbox.Event],
    ) -> list[Memory]:
        """Insert the rows (superseding by key); ``events`` gets each webhook event it causes."""
        s, tenant = tx.session, rows[0]["tenant_id"]
        if all(b.key is None for b in bodies):
            created = await repo.insert_many(s, rows)
            await changes.record(tx, tenant, p.subject, created, "created", [], ns, queue=events)
            return created
        # Keyed writes go one at a time, in request order, so a batch that names the same key
        # twice ends with the later one current and the earlier one in its history.
        out: list[Memory] = []
        for row, body in zip(rows, bodies, strict=True):
            old = None
            if body.key is not None:
                old = await repo.current_for_key(
                    s,
                    tenant,
                    row["namespace_id"],
                    scope=row["scope"],
                    owner=repo.owner_of(row["scope"], row["user_id"], row["session_id"]),
                    type=row["type"],
                    key=body.key,
                )
            if old is not None and old.content_hash == row["content_hash"] and old.metadata_ == row["metadata_"]:
                out.append(old)  # the same statement again: nothing changed, nothing to supersede
                continue
            if old is not None:
                old = await repo.supersede(s, tenant, old, row["id"], row["valid_from"])
                fields = ["superseded_at", "valid_to"]
                await changes.record(tx, tenant, p.subject, [old], "superseded", fields, ns, queue=events)
                row = {**row, "supersedes": old.id}
            (m,) = await repo.insert_many(s, [row])
            await changes.record(tx, tenant, p.subject, [m], "created", ["supersedes"] if old else [], ns, queue=events)
            out.append(m)
        return out

    # ---- reads ----------------------------------------------------------------------------

    @operation("read")
    async def get_memory(self, p: Principal, ns: str, memory_id: uuid.UUID) -> MemoryOut:
        """One memory by id (any version), including tenant- and system-scope memories."""
        p.require("read", ns)
        # The searches that found it and are not yet written count in this read's own write.
        pending = await self._accesses.take(p.tenant_id, memory_id)
        try:
            async with self._open(p, ns, scope=None) as (tx, namespace):
                # One statement both counts the access and returns the row as it now is.
                m = await repo.get_and_touch(
                    tx.session, p.tenant_id, namespace.id, memory_id, accesses=1 + pending, reader=p.reader
                )
                if m is None:
                    m = await repo.get_system(tx.session, memory_id)
                if m is None:
                    raise MemoryNotFound(f"No memory {memory_id} in namespace '{ns}'.")
        except BaseException:
            self._accesses.give_back(p.tenant_id, memory_id, pending)
            raise
        return memory_out(m, ns)

    @operation("read")
    async def list_memories(
        self,
        p: Principal,
        ns: str,
        filters: MemoryFilters | None = None,
        *,
        limit: int = 50,
        cursor: str | None = None,
    ) -> MemoryPage:
        """List memories newest first through the scope chain, with a cursor for the next page."""
        async with self._open(p, ns, "read") as (tx, namespace):
            rows, next_cursor = await repo.page(
                tx.session, p.tenant_id, namespace.id, filters, limit=limit, cursor=cursor
            )
        return MemoryPage(data=[memory_out(m, ns) for m in rows], next_cursor=next_cursor)

    @operation("read")
    async def memory_history(self, p: Principal, ns: str, memory_id: uuid.UUID) -> MemoryHistory:
        """Every version of a memory and every change to them, with who and when."""
        async with self._open(p, ns, "read") as (tx, namespace):
            tenant = p.tenant_id
            if await repo.get(tx.session, tenant, namespace.id, memory_id, reader=p.reader) is None:
                if await repo.get_system(tx.session, memory_id) is None:
                    raise MemoryNotFound(f"No memory {memory_id} in namespace '{ns}'.")
                tenant = SYSTEM_TENANT_ID
        async with self._db.tenant_tx(tenant) as tx:
            versions = await repo.version_chain(tx.session, tenant, memory_id)
            entries = await repo.history_entries(tx.session, tenant, [v.id for v in versions])
        current = next((v.id for v in versions if v.superseded_at is None), None)
        return MemoryHistory(
            memory_id=memory_id,
            current_id=current,
            versions=[memory_out(v, ns) for v in versions],
            changes=[
                MemoryChange(
                    memory_id=e.memory_id,
                    action=e.action,
                    actor=e.actor,
                    at=e.at,
                    changed_fields=list(e.changed_fields),
                    snapshot=e.snapshot,
                )
                for e in entries
            ],
        )

    # ---- changes --------------------------------------------------------------------------

    @asynccontextmanager
    async def _mutable(self, p: Principal, ns: str, memory_id: uuid.UUID) -> AsyncIterator[tuple[TenantTx, Memory]]:
        """The memory locked for change in the transaction that may change it: the caller's
        tenant for its own memories, the system tenant's for an operator's system memories."""
        async with self._open(p, ns, "write") as (tx, namespace):
            m = await repo.get(tx.session, p.tenant_id, namespace.id, memory_id, lock=True, reader=p.reader)
            if m is not None:
                _may_write_level(p, m.scope)
                yield tx, m
                return
            system = await repo.get_system(tx.session, memory_id)
        if system is None:
            raise MemoryNotFound(f"No memory {memory_id} in namespace '{ns}'.")
        _may_write_level(p, system.scope)
        async with self._db.tenant_tx(SYSTEM_TENANT_ID) as tx:
            m = await repo.get(tx.session, SYSTEM_TENANT_ID, None, memory_id, lock=True)
            if m is None:
                raise MemoryNotFound(f"No memory {memory_id} in namespace '{ns}'.")
            yield tx, m

    async def _change(
        self,
        p: Principal,
        ns: str,
        memory_id: uuid.UUID,
        action: str,
        values: Callable[[Memory], Awaitable[dict[str, Any]]],
    ) -> MemoryOut:
        async with self._mutable(p, ns, memory_id) as (tx, current):
            if current.superseded_at is not None:
                raise MemorySuperseded(
                    f"Memory {memory_id} was superseded by {current.superseded_by}; change the current version.",
                    extra={"superseded_by": str(current.superseded_by)},
                )
            new = await values(current)
            try:
                async with tx.session.begin_nested():
                    m = await repo.update_fields(tx.session, current.tenant_id, current.id, new)
            except IntegrityError as exc:
                if _is_key_race(exc):
                    raise KeyConflict("Another current memory already has this scope, type and key.") from exc
                raise
            fields = sorted(k.removesuffix("_") for k in new if k not in ("embedding", "embedding_model"))
            await changes.record(tx, m.tenant_id, p.subject, [m], action, fields, ns)
            await audit.record(
                tx.session,
                m.tenant_id,
                p.subject,
                AUDIT_ACTION[action],
                namespace_id=m.namespace_id,
                target_id=str(memory_id),
                detail={"fields": fields},
            )
        return memory_out(m, ns)

    @operation("write")
    async def update_memory(self, p: Principal, ns: str, memory_id: uuid.UUID, patch: MemoryPatch) -> MemoryOut:
        """Correct fields of the current version in place (a new `content` is re-embedded); every
        correction is kept in the memory's history. To record that something changed in the
        world, store a new memory with the same key instead: that supersedes it."""
        values: dict[str, Any] = {}
        for name in patch.model_fields_set:
            value = getattr(patch, name)
            values["metadata_" if name == "metadata" else name] = getattr(value, "value", value)
        if patch.content is not None:
            values["embedding"] = (await self._embed(p, [patch.content]))[0]
            values["embedding_model"] = self._embedder.model_id
            values["content_hash"] = content_hash(patch.content)

        async def check(current: Memory) -> dict[str, Any]:
            vf = values.get("valid_from", current.valid_from)
            vt = values.get("valid_to", current.valid_to)
            if vf is not None and vt is not None and vt < vf:
                raise InvalidInput("valid_to must not be before valid_from", extra={"field": "valid_to"})
            for field, level in (("user_id", "user"), ("session_id", "session")):
                if current.scope == level and field in values and values[field] is None:
                    raise InvalidInput(f"a {level}-scope memory needs its {field}", extra={"field": field})
            return values

        return await self._change(p, ns, memory_id, "updated", check)

    @operation("write")
    async def promote_memory(self, p: Principal, ns: str, memory_id: uuid.UUID) -> MemoryOut:
        """Make a tentative (or archived) memory stable."""

        async def to_stable(current: Memory) -> dict[str, Any]:
            return {"state": MemoryState.stable.value}

        return await self._change(p, ns, memory_id, "promoted", to_stable)

    @operation("write")
    async def archive_memory(self, p: Principal, ns: str, memory_id: uuid.UUID) -> MemoryOut:
        """Archive a memory: kept, but left out of search and lists unless asked for."""

        async def to_archived(current: Memory) -> dict[str, Any]:
            return {"state": MemoryState.archived.value}

        return await self._change(p, ns, memory_id, "archived", to_archived)

    @operation("write")
    async def delete_memory(self, p: Principal, ns: str, memory_id: uuid.UUID) -> None:
        """Delete a memory permanently with every version of it, its history and entity links."""
        async with self._mutable(p, ns, memory_id) as (tx, m):
            versions = await repo.version_chain(tx.session, m.tenant_id, m.id)
            ids = [v.id for v in versions] or [m.id]
            # Duplicates merged into it hold the same statement: they go too.
            ids = list(dict.fromkeys([*ids, *await repo.merged_into(tx.session, m.tenant_id, ids)]))
            await repo.remove_ids(tx.session, m.tenant_id, ids)
            await audit.record(
                tx.session,
                m.tenant_id,
                p.subject,
                "memory.delete",
                namespace_id=m.namespace_id,
                target_id=str(memory_id),
                detail={"versions_deleted": len(ids)},
            )
            # The id alone: the content is gone, and must not live on in an outbox.
            where = ns if m.namespace_id is not None else None
            await outbox.emit(tx, m.tenant_id, "memory.deleted", where, {"id": str(memory_id), "namespace": where})
