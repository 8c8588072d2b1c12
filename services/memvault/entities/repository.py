"""Entities and their links to memories. Every function filters by tenant and namespace
explicitly; row-level security is the second lock, not the only one. Relations between entities
and the walk over them are in entities/relations_repository.py."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import ColumnElement, Row, and_, delete, exists, func, literal, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.db.pagination import newest_first
from memvault.entities.models import Entity, MemoryEntity, Relation
from memvault.entities.schemas import MAX_ALIASES, EntityIn
from memvault.errors import Conflict, InvalidInput, NotFound
from memvault.memories import reads_repository as memory_reads
from memvault.memories.models import Memory
from memvault.memories.schemas import MemoryState, Metadata

# The graph view stays a bounded answer however dense the graph is (relations_repository.py
# bounds the rest of it).
MAX_LINKED_MEMORIES = 50


class EntityNotFound(NotFound):
    code = "entity_not_found"
    title = "Entity not found"


class RelationNotFound(NotFound):
    code = "relation_not_found"
    title = "Relation not found"


class EntityLinkNotFound(NotFound):
    code = "entity_link_not_found"
    title = "Entity link not found"


class EntityExists(Conflict):
    code = "entity_exists"
    title = "Entity exists"


def _entity_scope(tenant_id: uuid.UUID, namespace_id: uuid.UUID) -> list[ColumnElement[bool]]:
    return [Entity.tenant_id == tenant_id, Entity.namespace_id == namespace_id]


def _like_pattern(q: str) -> str:
    escaped = q.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


# ---- entities -------------------------------------------------------------------------------


async def get(s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, entity_id: uuid.UUID) -> Entity | None:
    return await s.scalar(select(Entity).where(*_entity_scope(tenant_id, namespace_id), Entity.id == entity_id))


async def find_by_name(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, type_: str, name: str, *, for_update: bool = False
) -> Entity | None:
    stmt = select(Entity).where(
        *_entity_scope(tenant_id, namespace_id), Entity.type == type_, func.lower(Entity.name) == name.lower()
    )
    if for_update:
        stmt = stmt.with_for_update()
    return await s.scalar(stmt, execution_options={"populate_existing": True})


async def lookup(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, name: str, *, type_: str | None = None, limit: int
) -> list[Entity]:
    """Entities called `name`, ignoring case: those whose name it is first, then those for which
    it is an alias, each group by name."""
    wanted = name.strip().lower()
    alias = func.unnest(Entity.aliases).table_valued("a").render_derived()
    by_alias = exists(select(literal(1)).select_from(alias).where(func.lower(alias.c.a) == wanted))
    by_name = func.lower(Entity.name) == wanted
    stmt = select(Entity).where(*_entity_scope(tenant_id, namespace_id), or_(by_name, by_alias))
    if type_ is not None:
        stmt = stmt.where(Entity.type == type_)
    stmt = stmt.order_by(by_name.desc(), Entity.name, Entity.id).limit(limit)
    return list((await s.scalars(stmt)).all())


async def resolve(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, ref: str | uuid.UUID, *, field: str
) -> Entity:
    """The one entity `ref` names: an id, else a name, else an alias (ignoring case). A name two
    entities share (Paris the city and Paris the person) is refused with both candidates, so the
    caller can pass an id instead of acting on the wrong one."""
    entity_id = ref if isinstance(ref, uuid.UUID) else _as_uuid(ref)
    if entity_id is not None:
        found = await get(s, tenant_id, namespace_id, entity_id)
        if found is None:
            raise EntityNotFound(f"No entity {entity_id} in this namespace.", extra={"field": field})
        return found
    matches = await lookup(s, tenant_id, namespace_id, str(ref), limit=10)
    named = [e for e in matches if e.name.lower() == str(ref).strip().lower()] or matches
    if not named:
        raise EntityNotFound(f"No entity named '{ref}' in this namespace.", extra={"field": field})
    if len(named) > 1:
        candidates = [{"id": str(e.id), "name": e.name, "type": e.type} for e in named]
        listed = ", ".join(f"{c['name']} ({c['type']}, {c['id']})" for c in candidates)
        raise InvalidInput(
            f"'{ref}' names {len(named)} entities: {listed}; pass one's id.",
            extra={"field": field, "candidates": candidates},
        )
    return named[0]


def _as_uuid(ref: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(ref.strip())
    except ValueError:
        return None


async def insert_entity(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, body: EntityIn, actor: str
) -> Entity | None:
    """Insert, or return None when (type, name) is taken in the namespace, whatever the case."""
    stmt = (
        insert(Entity)
        .values(
            tenant_id=tenant_id,
            namespace_id=namespace_id,
            name=body.name,
            type=body.type.value,
            aliases=body.aliases,
            description=body.description,
            metadata_=body.metadata,
            created_by=actor,
        )
        .on_conflict_do_nothing(
            index_elements=[Entity.tenant_id, Entity.namespace_id, Entity.type, func.lower(Entity.name)]
        )
        .returning(Entity)
    )
    return await s.scalar(stmt)


_METADATA = TypeAdapter(Metadata)


def merge(existing: Entity, body: EntityIn) -> dict[str, Any]:
    """What an upsert changes: aliases gain the new ones, a new description replaces the old,
    metadata keys are merged (new values win). The stored name keeps its spelling."""
    known = {existing.name.lower(), *(a.lower() for a in existing.aliases)}
    aliases = list(existing.aliases)
    for alias in body.aliases:
        if alias.lower() not in known:
            known.add(alias.lower())
            aliases.append(alias)
    try:
        metadata = _METADATA.validate_python({**existing.metadata_, **body.metadata})
    except ValidationError as exc:
        raise InvalidInput(
            f"merged metadata is invalid: {exc.errors()[0]['msg']}", extra={"field": "metadata"}
        ) from exc
    # Extraction upserts the same entity again and again; keeping the oldest aliases and dropping
    # the overflow is better than failing the whole extraction.
    return {
        "aliases": aliases[:MAX_ALIASES],
        "description": body.description if body.description is not None else existing.description,
        "metadata_": metadata,
    }


UpsertOutcome = Literal["created", "updated", "unchanged"]


async def upsert(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, body: EntityIn, actor: str
) -> tuple[Entity, UpsertOutcome]:
    """Create the entity, or merge into the one with the same (type, name).

    Safe under concurrency: the insert waits for a competing insert of the same name to commit,
    and the row is then locked for the merge."""
    created = await insert_entity(s, tenant_id, namespace_id, body, actor)
    if created is not None:
        return created, "created"
    existing = await find_by_name(s, tenant_id, namespace_id, body.type.value, body.name, for_update=True)
    if existing is None:  # deleted between the two statements; a retry by the caller will create it
        raise EntityNotFound(f"Entity '{body.name}' was deleted while being updated; retry.")
    changes = merge(existing, body)
    if (changes["aliases"], changes["description"], changes["metadata_"]) == (
        existing.aliases,
        existing.description,
        existing.metadata_,
    ):
        return existing, "unchanged"
    updated = await update_fields(s, tenant_id, namespace_id, existing.id, changes)
    assert updated is not None
    return updated, "updated"


async def page(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    *,
    type_: str | None,
    q: str | None,
    limit: int,
    cursor: str | None,
) -> tuple[list[Entity], str | None]:
    """Newest first, keyset-paginated on (created_at, id)."""
    stmt = select(Entity).where(*_entity_scope(tenant_id, namespace_id))
    if type_ is not None:
        stmt = stmt.where(Entity.type == type_)
    if q:
        pattern = _like_pattern(q)
        alias = func.unnest(Entity.aliases).table_valued("a").render_derived()
        stmt = stmt.where(
            or_(
                func.lower(Entity.name).like(pattern, escape="\\"),
                exists(select(literal(1)).select_from(alias).where(func.lower(alias.c.a).like(pattern, escape="\\"))),
            )
        )
    rows, next_cursor = await newest_first(s, stmt, Entity.created_at, Entity.id, limit=limit, cursor=cursor)
    return list(rows), next_cursor


async def update_fields(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, entity_id: uuid.UUID, values: dict[str, Any]
) -> Entity | None:
    stmt = (
        update(Entity)
        .where(*_entity_scope(tenant_id, namespace_id), Entity.id == entity_id)
        .values(**values, updated_at=func.now())
        .returning(Entity)
    )
    # populate_existing: the caller may hold this row already; without it the session would hand
    # back the stale object instead of what the UPDATE returned.
    return await s.scalar(stmt, execution_options={"synchronize_session": False, "populate_existing": True})


async def remove(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, entity_id: uuid.UUID
) -> dict[str, int] | None:
    """Delete the entity; its relations and memory links go with it (foreign keys cascade), the
    memories stay. Returns how many relations and links went, or None when there was no entity."""
    relations = await s.scalar(
        select(func.count())
        .select_from(Relation)
        .where(
            Relation.tenant_id == tenant_id,
            or_(Relation.source_id == entity_id, Relation.target_id == entity_id),
        )
    )
    links = await s.scalar(
        select(func.count())
        .select_from(MemoryEntity)
        .where(MemoryEntity.tenant_id == tenant_id, MemoryEntity.entity_id == entity_id)
    )
    stmt = delete(Entity).where(*_entity_scope(tenant_id, namespace_id), Entity.id == entity_id).returning(Entity.id)
    if await s.scalar(stmt) is None:
        return None
    return {"relations_deleted": relations or 0, "links_deleted": links or 0}


async def by_ids(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, Entity]:
    if not ids:
        return {}
    rows = await s.scalars(select(Entity).where(*_entity_scope(tenant_id, namespace_id), Entity.id.in_(list(ids))))
    return {e.id: e for e in rows}


# ---- memory links ---------------------------------------------------------------------------


async def memory_in_namespace(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, memory_id: uuid.UUID
) -> bool:
    stmt = select(Memory.id).where(
        Memory.tenant_id == tenant_id, Memory.namespace_id == namespace_id, Memory.id == memory_id
    )
    return (await s.scalar(stmt)) is not None


async def link_memories(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    memory_id: uuid.UUID,
    entity_ids: Sequence[uuid.UUID],
) -> int:
    """Link a memory to entities of the namespace; links that exist already are kept. Raises
    EntityNotFound (listing the ids) if any entity is not in this tenant's namespace, before
    linking anything. The caller vouches for the memory. Returns how many links are new."""
    wanted = list(dict.fromkeys(entity_ids))
    if not wanted:
        return 0
    found = await by_ids(s, tenant_id, namespace_id, wanted)
    missing = [str(e) for e in wanted if e not in found]
    if missing:
        raise EntityNotFound(
            f"No entity {', '.join(missing)} in this namespace.", extra={"field": "entity_ids", "entity_ids": missing}
        )
    stmt = (
        insert(MemoryEntity)
        .values([{"tenant_id": tenant_id, "memory_id": memory_id, "entity_id": e} for e in wanted])
        .on_conflict_do_nothing()
        .returning(MemoryEntity.entity_id)
    )
    return len((await s.scalars(stmt)).all())


async def unlink(s: AsyncSession, tenant_id: uuid.UUID, memory_id: uuid.UUID, entity_id: uuid.UUID) -> bool:
    stmt = (
        delete(MemoryEntity)
        .where(
            MemoryEntity.tenant_id == tenant_id,
            MemoryEntity.memory_id == memory_id,
            MemoryEntity.entity_id == entity_id,
        )
        .returning(MemoryEntity.entity_id)
    )
    return (await s.scalar(stmt)) is not None


async def entities_of_memory(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, memory_id: uuid.UUID
) -> list[Entity]:
    stmt = (
        select(Entity)
        .join(MemoryEntity, and_(MemoryEntity.tenant_id == Entity.tenant_id, MemoryEntity.entity_id == Entity.id))
        .where(*_entity_scope(tenant_id, namespace_id), MemoryEntity.memory_id == memory_id)
        .order_by(Entity.name, Entity.id)
    )
    return list((await s.scalars(stmt)).all())


async def linked_memories(
    s: AsyncSession, tenant_id: uuid.UUID, entity_id: uuid.UUID, *, reader: str | None = None
) -> list[Row[uuid.UUID, str, str, datetime]]:
    """Current memories linked to the entity: neither superseded nor archived, newest first; with
    a ``reader`` (a signed-in user), not other users' own."""
    stmt = (
        select(Memory.id, Memory.type, Memory.content, Memory.created_at)
        .join(MemoryEntity, and_(MemoryEntity.tenant_id == Memory.tenant_id, MemoryEntity.memory_id == Memory.id))
        .where(
            MemoryEntity.tenant_id == tenant_id,
            MemoryEntity.entity_id == entity_id,
            Memory.tenant_id == tenant_id,
            Memory.superseded_at.is_(None),
            Memory.state != MemoryState.archived.value,
        )
        .order_by(Memory.created_at.desc(), Memory.id.desc())
        .limit(MAX_LINKED_MEMORIES)
    )
    if reader is not None:
        stmt = stmt.where(memory_reads.readable_by(reader))
    return list((await s.execute(stmt)).all())


# ---- facts (facts/service.py) ---------------------------------------------------------------


async def by_name_or_alias(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, name: str, *, limit: int = 2
) -> list[Entity]:
    """Entities whose name or one of whose aliases is ``name``, ignoring case and outer spaces."""
    wanted = name.strip().lower()
    alias = func.unnest(Entity.aliases).table_valued("a").render_derived()
    stmt = (
        select(Entity)
        .where(
            *_entity_scope(tenant_id, namespace_id),
            or_(
                func.lower(Entity.name) == wanted,
                exists(select(literal(1)).select_from(alias).where(func.lower(alias.c.a) == wanted)),
            ),
        )
        .order_by(Entity.created_at, Entity.id)
        .limit(limit)
    )
    return list((await s.scalars(stmt)).all())
