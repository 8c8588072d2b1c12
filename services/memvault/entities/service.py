"""Entities, relations and memory links: the facade's part for the entity graph."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import IntegrityError

from memvault.entities import relations_repository as relations_repo
from memvault.entities import repository as repo
from memvault.entities.models import Entity, Relation
from memvault.entities.repository import EntityExists, EntityLinkNotFound, EntityNotFound, RelationNotFound
from memvault.entities.schemas import (
    MAX_HOPS,
    EntityGraph,
    EntityIn,
    EntityOut,
    EntityPage,
    EntityPatch,
    EntityType,
    LinkedMemory,
    MemoryEntities,
    Neighbour,
    RelationIn,
    RelationOut,
    RelationPage,
)
from memvault.errors import InvalidInput
from memvault.facade import FacadeBase
from memvault.memories.service import MemoryNotFound
from memvault.operations import operation
from memvault.principal import Principal

__all__ = [
    "EntityExists",
    "EntityLinkNotFound",
    "EntityNotFound",
    "EntityOps",
    "RelationNotFound",
]


def entity_out(e: Entity, namespace: str) -> EntityOut:
    return EntityOut(
        id=e.id,
        namespace=namespace,
        name=e.name,
        type=EntityType(e.type),
        aliases=list(e.aliases),
        description=e.description,
        metadata=e.metadata_,
        created_by=e.created_by,
        created_at=e.created_at,
        updated_at=e.updated_at,
    )


def relation_out(r: Relation, namespace: str) -> RelationOut:
    return RelationOut(
        id=r.id,
        namespace=namespace,
        source_id=r.source_id,
        type=r.type,
        target_id=r.target_id,
        valid_from=r.valid_from,
        valid_to=r.valid_to,
        # Stored as real: round away the float32 noise (0.9 would read back as 0.8999999761...).
        confidence=round(r.confidence, 6),
        metadata=r.metadata_,
        created_by=r.created_by,
        created_at=r.created_at,
    )


def _as_utc(at: datetime | None) -> datetime | None:
    if at is None or at.tzinfo is not None:
        return at
    return at.replace(tzinfo=UTC)


class EntityOps(FacadeBase):
    """Entities, typed relations with valid time, and links from memories to entities."""

    # ---- entities ---------------------------------------------------------------------------

    @operation("write")
    async def create_entity(self, p: Principal, ns: str, body: EntityIn) -> EntityOut:
        """Create an entity. Its (type, name) must be new in the namespace, ignoring case: a
        duplicate raises `entity_exists` carrying `existing_id`."""
        async with self._open(p, ns, "write") as (tx, namespace):
            e = await repo.insert_entity(tx.session, p.tenant_id, namespace.id, body, p.subject)
            if e is None:
                existing = await repo.find_by_name(tx.session, p.tenant_id, namespace.id, body.type.value, body.name)
                raise EntityExists(
                    f"A {body.type.value} named '{body.name}' already exists in namespace '{ns}'.",
                    extra={"existing_id": str(existing.id)} if existing is not None else None,
                )
            await self._audit(
                tx,
                p,
                "entity.create",
                namespace_id=namespace.id,
                target_id=str(e.id),
                detail={"type": e.type},
            )
        return entity_out(e, ns)

    @operation("write")
    async def upsert_entity(self, p: Principal, ns: str, body: EntityIn) -> tuple[EntityOut, bool]:
        """Create the entity, or merge into the existing one with the same (type, name): new
        aliases are added, a new description replaces the old, metadata keys are merged.
        Returns (entity, created)."""
        async with self._open(p, ns, "write") as (tx, namespace):
            e, outcome = await repo.upsert(tx.session, p.tenant_id, namespace.id, body, p.subject)
            if outcome != "unchanged":
                await self._audit(
                    tx,
                    p,
                    "entity.create" if outcome == "created" else "entity.update",
                    namespace_id=namespace.id,
                    target_id=str(e.id),
                    detail={"type": e.type, "upsert": True},
                )
        return entity_out(e, ns), outcome == "created"

    @operation("read")
    async def list_entities(
        self,
        p: Principal,
        ns: str,
        *,
        type: EntityType | None = None,
        q: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> EntityPage:
        """List entities newest first. `q` matches part of the name or of any alias, ignoring case."""
        async with self._open(p, ns, "read") as (tx, namespace):
            rows, next_cursor = await repo.page(
                tx.session,
                p.tenant_id,
                namespace.id,
                type_=type.value if type is not None else None,
                q=q,
                limit=limit,
                cursor=cursor,
            )
        return EntityPage(data=[entity_out(e, ns) for e in rows], next_cursor=next_cursor)

    @operation("read")
    async def get_entity(
        self, p: Principal, ns: str, entity_id: uuid.UUID, hops: int = 1, valid_at: datetime | None = None
    ) -> EntityGraph:
        """An entity with its neighbourhood: the entities within `hops` relations (0-3, either
        direction; each with its distance and one shortest path), the relations among them, and
        the current memories linked to the entity. With `valid_at`, only relations valid then
        are followed."""
        p.require("read", ns)
        if not 0 <= hops <= MAX_HOPS:
            raise InvalidInput(f"hops must be between 0 and {MAX_HOPS}", extra={"field": "hops"})
        valid_at = _as_utc(valid_at)
        async with self._open(p, ns, scope=None) as (tx, namespace):
            e = await repo.get(tx.session, p.tenant_id, namespace.id, entity_id)
            if e is None:
                raise EntityNotFound(f"No entity {entity_id} in namespace '{ns}'.")
            hops_found, cut = await relations_repo.neighbours(
                tx.session, p.tenant_id, namespace.id, entity_id, hops, valid_at
            )
            found = await repo.by_ids(tx.session, p.tenant_id, namespace.id, [h.entity_id for h in hops_found])
            relations: list[Relation] = []
            if found:
                relations, cut_relations = await relations_repo.relations_among(
                    tx.session, p.tenant_id, namespace.id, [entity_id, *found], valid_at
                )
                cut = cut or cut_relations
            memories = await repo.linked_memories(tx.session, p.tenant_id, entity_id, reader=p.reader)
        neighbours = [
            Neighbour(
                entity=entity_out(found[h.entity_id], ns),
                distance=h.distance,
                path=h.path,
                relation_path=h.relation_path,
            )
            for h in hops_found
            if h.entity_id in found
        ]
        neighbours.sort(key=lambda n: (n.distance, n.entity.name.lower(), n.entity.id))
        return EntityGraph(
            entity=entity_out(e, ns),
            hops=hops,
            valid_at=valid_at,
            neighbours=neighbours,
            relations=[relation_out(r, ns) for r in relations],
            truncated=cut,
            memories=[LinkedMemory(id=m.id, type=m.type, content=m.content, created_at=m.created_at) for m in memories],
        )

    @operation("write")
    async def update_entity(self, p: Principal, ns: str, entity_id: uuid.UUID, patch: EntityPatch) -> EntityOut:
        """Change fields of an entity. Aliases and metadata are replaced, not merged."""
        p.require("write", ns)
        values: dict[str, Any] = {}
        for name in patch.model_fields_set:
            value = getattr(patch, name)
            values["metadata_" if name == "metadata" else name] = getattr(value, "value", value)
        async with self._open(p, ns, scope=None) as (tx, namespace):
            current = await repo.get(tx.session, p.tenant_id, namespace.id, entity_id)
            if current is None:
                raise EntityNotFound(f"No entity {entity_id} in namespace '{ns}'.")
            new_type, new_name = values.get("type", current.type), values.get("name", current.name)
            clash = await repo.find_by_name(tx.session, p.tenant_id, namespace.id, new_type, new_name)
            if clash is not None and clash.id != entity_id:
                raise EntityExists(
                    f"A {new_type} named '{new_name}' already exists in namespace '{ns}'.",
                    extra={"existing_id": str(clash.id)},
                )
            try:
                e = await repo.update_fields(tx.session, p.tenant_id, namespace.id, entity_id, values)
            except IntegrityError as exc:  # a concurrent create took the name after our check
                raise EntityExists(f"A {new_type} named '{new_name}' already exists in namespace '{ns}'.") from exc
            assert e is not None
            await self._audit(
                tx,
                p,
                "entity.update",
                namespace_id=namespace.id,
                target_id=str(entity_id),
                detail={"fields": sorted(patch.model_fields_set)},
            )
        return entity_out(e, ns)

    @operation("write")
    async def delete_entity(self, p: Principal, ns: str, entity_id: uuid.UUID) -> None:
        """Delete an entity with its relations and memory links. The memories themselves stay."""
        async with self._open(p, ns, "write") as (tx, namespace):
            counts = await repo.remove(tx.session, p.tenant_id, namespace.id, entity_id)
            if counts is None:
                raise EntityNotFound(f"No entity {entity_id} in namespace '{ns}'.")
            await self._audit(
                tx,
                p,
                "entity.delete",
                namespace_id=namespace.id,
                target_id=str(entity_id),
                detail=counts,
            )

    # ---- relations --------------------------------------------------------------------------

    @operation("write")
    async def create_relation(self, p: Principal, ns: str, body: RelationIn) -> RelationOut:
        """Relate two entities of the namespace (source --type--> target), optionally for a
        stretch of valid time."""
        async with self._open(p, ns, "write") as (tx, namespace):
            r = await relations_repo.insert_relation(tx.session, p.tenant_id, namespace.id, body, p.subject)
            await self._audit(
                tx,
                p,
                "relation.create",
                namespace_id=namespace.id,
                target_id=str(r.id),
                detail={"type": r.type, "source_id": str(r.source_id), "target_id": str(r.target_id)},
            )
        return relation_out(r, ns)

    @operation("read")
    async def list_relations(
        self,
        p: Principal,
        ns: str,
        *,
        entity_id: uuid.UUID | None = None,
        type: str | None = None,
        valid_at: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> RelationPage:
        """List relations newest first; `entity_id` matches either end."""
        async with self._open(p, ns, "read") as (tx, namespace):
            rows, next_cursor = await relations_repo.page_relations(
                tx.session,
                p.tenant_id,
                namespace.id,
                entity_id=entity_id,
                type_=type,
                valid_at=_as_utc(valid_at),
                limit=limit,
                cursor=cursor,
            )
        return RelationPage(data=[relation_out(r, ns) for r in rows], next_cursor=next_cursor)

    @operation("write")
    async def delete_relation(self, p: Principal, ns: str, relation_id: uuid.UUID) -> None:
        """Delete a relation; the entities stay."""
        async with self._open(p, ns, "write") as (tx, namespace):
            if not await relations_repo.remove_relation(tx.session, p.tenant_id, namespace.id, relation_id):
                raise RelationNotFound(f"No relation {relation_id} in namespace '{ns}'.")
            await self._audit(
                tx,
                p,
                "relation.delete",
                namespace_id=namespace.id,
                target_id=str(relation_id),
            )

    # ---- memory links -----------------------------------------------------------------------

    @operation("write")
    async def link_entities(
        self, p: Principal, ns: str, memory_id: uuid.UUID, entity_ids: list[uuid.UUID]
    ) -> MemoryEntities:
        """Link a memory to entities of its namespace; linking twice is harmless. All or none:
        one unknown entity id links nothing."""
        async with self._open(p, ns, "write") as (tx, namespace):
            if not await repo.memory_in_namespace(tx.session, p.tenant_id, namespace.id, memory_id):
                raise MemoryNotFound(f"No memory {memory_id} in namespace '{ns}'.")
            added = await repo.link_memories(tx.session, p.tenant_id, namespace.id, memory_id, entity_ids)
            await self._audit(
                tx,
                p,
                "memory.link_entities",
                namespace_id=namespace.id,
                target_id=str(memory_id),
                detail={"entity_ids": [str(e) for e in dict.fromkeys(entity_ids)], "added": added},
            )
            linked = await repo.entities_of_memory(tx.session, p.tenant_id, namespace.id, memory_id)
        return MemoryEntities(memory_id=memory_id, entities=[entity_out(e, ns) for e in linked])

    @operation("write")
    async def unlink_entity(self, p: Principal, ns: str, memory_id: uuid.UUID, entity_id: uuid.UUID) -> None:
        """Remove the link between a memory and an entity; both stay."""
        async with self._open(p, ns, "write") as (tx, namespace):
            if not await repo.memory_in_namespace(tx.session, p.tenant_id, namespace.id, memory_id):
                raise MemoryNotFound(f"No memory {memory_id} in namespace '{ns}'.")
            if await repo.get(tx.session, p.tenant_id, namespace.id, entity_id) is None:
                raise EntityNotFound(f"No entity {entity_id} in namespace '{ns}'.")
            if not await repo.unlink(tx.session, p.tenant_id, memory_id, entity_id):
                raise EntityLinkNotFound(f"Memory {memory_id} is not linked to entity {entity_id}.")
            await self._audit(
                tx,
                p,
                "memory.unlink_entity",
                namespace_id=namespace.id,
                target_id=str(memory_id),
                detail={"entity_id": str(entity_id)},
            )
