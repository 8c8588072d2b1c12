"""The facade's read-only graph queries: entities by name, paths between two entities, the
entities related to one, and the graph of a namespace, user or session as nodes and edges."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from memvault.entities import relations_repository as relations_repo
from memvault.entities import repository as entities_repo
from memvault.entities.models import Entity, Relation
from memvault.entities.schemas import EntityType, relation_type
from memvault.entities.service import _as_utc, entity_out, relation_out
from memvault.errors import InvalidInput
from memvault.facade import FacadeBase
from memvault.graph import repository as repo
from memvault.graph.schemas import (
    MAX_EXPORT,
    MAX_PATH_DEPTH,
    MAX_PATHS,
    MAX_RELATED,
    Direction,
    EntityMatches,
    GraphEdge,
    GraphExport,
    GraphNode,
    GraphPath,
    MemoryGraph,
    PathsOut,
    RelatedEntity,
    RelatedOut,
)
from memvault.memories import repository as memories_repo
from memvault.memories.service import MemoryNotFound
from memvault.operations import operation
from memvault.principal import Principal

EntityRef = str | uuid.UUID
LABEL_CHARS = 200
# A memory's neighbourhood is drawn on one small picture: this many of each at most.
MEMORY_GRAPH_ENTITIES = 12
MEMORY_GRAPH_RELATIONS = 24


def _bounded(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise InvalidInput(f"{name} must be between {low} and {high}", extra={"field": name})


def _path_text(
    entities: list[uuid.UUID],
    relations: list[uuid.UUID],
    names: dict[uuid.UUID, Entity],
    by_id: dict[uuid.UUID, Relation],
) -> str:
    parts = [names[entities[0]].name]
    for here, there, rel_id in zip(entities, entities[1:], relations, strict=False):
        r = by_id[rel_id]
        forward = r.source_id == here and r.target_id == there
        parts.append(f"-[{r.type}]->" if forward else f"<-[{r.type}]-")
        parts.append(names[there].name)
    return " ".join(parts)


def _label(content: str) -> str:
    return content if len(content) <= LABEL_CHARS else content[: LABEL_CHARS - 1] + "…"


class GraphOps(FacadeBase):
    """Read-only questions about the entity graph, for models and for clients that draw it."""

    @operation("read")
    async def find_entities(
        self, p: Principal, ns: str, name: str, *, type: EntityType | None = None, limit: int = 10
    ) -> EntityMatches:
        """Entities whose name or one of whose aliases is `name`, ignoring case: name matches
        first. Nothing found is an empty list (list_entities' `q` finds parts of names)."""
        _bounded("limit", limit, 1, 100)
        if not name.strip():
            raise InvalidInput("name must not be blank", extra={"field": "name"})
        async with self._open(p, ns, "read") as (tx, namespace):
            found = await entities_repo.lookup(
                tx.session, p.tenant_id, namespace.id, name, type_=type.value if type else None, limit=limit
            )
        return EntityMatches(name=name, data=[entity_out(e, ns) for e in found])

    @operation("read")
    async def graph_paths(
        self,
        p: Principal,
        ns: str,
        source: EntityRef,
        target: EntityRef,
        *,
        max_depth: int = 3,
        limit: int = 10,
        valid_at: datetime | None = None,
    ) -> PathsOut:
        """Paths of at most `max_depth` relations (1-4, either direction) between two entities,
        each given by id or by name, shortest first, each entity at most once per path."""
        p.require("read", ns)
        _bounded("max_depth", max_depth, 1, MAX_PATH_DEPTH)
        _bounded("limit", limit, 1, MAX_PATHS)
        valid_at = _as_utc(valid_at)
        async with self._open(p, ns, scope=None) as (tx, namespace):
            s, tenant, ns_id = tx.session, p.tenant_id, namespace.id
            src = await entities_repo.resolve(s, tenant, ns_id, source, field="source")
            dst = await entities_repo.resolve(s, tenant, ns_id, target, field="target")
            if src.id == dst.id:
                raise InvalidInput("source and target are the same entity", extra={"field": "target"})
            hops, cut = await relations_repo.neighbours(s, tenant, ns_id, dst.id, max_depth - 1, valid_at)
            near = {dst.id: 0, **{h.entity_id: h.distance for h in hops}}
            found = await repo.paths(
                s, tenant, ns_id, src.id, dst.id, depth=max_depth, near=near, cap=limit + 1, valid_at=valid_at
            )
            cut = cut or len(found) > limit
            found = found[:limit]
            entity_ids = list(dict.fromkeys(e for nodes, _ in found for e in nodes))
            entities = await entities_repo.by_ids(s, tenant, ns_id, entity_ids)
            by_id = await repo.relations_by_ids(s, tenant, ns_id, list(dict.fromkeys(r for _, rs in found for r in rs)))
        return PathsOut(
            source=entity_out(src, ns),
            target=entity_out(dst, ns),
            max_depth=max_depth,
            paths=[
                GraphPath(
                    length=len(rels),
                    entities=nodes,
                    relations=rels,
                    text=_path_text(nodes, rels, entities, by_id),
                )
                for nodes, rels in found
            ],
            entities=[entity_out(entities[e], ns) for e in entity_ids],
            relations=[relation_out(r, ns) for r in by_id.values()],
            truncated=cut,
        )

    @operation("read")
    async def related_entities(
        self,
        p: Principal,
        ns: str,
        entity: EntityRef,
        *,
        type: EntityType | None = None,
        relation: str | None = None,
        direction: Direction = "both",
        valid_at: datetime | None = None,
        limit: int = 50,
    ) -> RelatedOut:
        """The entities directly related to `entity` (by id or name), optionally only those of a
        type, through one relation type, or in one direction (`out`: entity --rel--> other)."""
        p.require("read", ns)
        _bounded("limit", limit, 1, MAX_RELATED)
        async with self._open(p, ns, scope=None) as (tx, namespace):
            root = await entities_repo.resolve(tx.session, p.tenant_id, namespace.id, entity, field="entity")
            rows = await repo.related(
                tx.session,
                p.tenant_id,
                namespace.id,
                root.id,
                type_=type.value if type else None,
                relation_type=relation_type(relation) if relation else None,
                direction=direction,
                valid_at=_as_utc(valid_at),
                limit=limit + 1,
            )
        return RelatedOut(
            entity=entity_out(root, ns),
            data=[
                RelatedEntity(
                    entity=entity_out(e, ns),
                    relation=relation_out(r, ns),
                    direction="out" if r.source_id == root.id else "in",
                )
                for r, e in rows[:limit]
            ],
            truncated=len(rows) > limit,
        )

    @operation("read")
    async def memory_graph(self, p: Principal, ns: str, memory_id: uuid.UUID) -> MemoryGraph:
        """A memory's entities, the relations with an end among them and the entities at their
        other ends: the memory's place in the entity graph, small enough to draw."""
        async with self._open(p, ns, "read") as (tx, namespace):
            s, tenant, ns_id = tx.session, p.tenant_id, namespace.id
            if await memories_repo.get(s, tenant, ns_id, memory_id, reader=p.reader) is None:
                raise MemoryNotFound(f"No memory {memory_id} in namespace '{ns}'.")
            linked = await entities_repo.entities_of_memory(s, tenant, ns_id, memory_id)
            shown = linked[:MEMORY_GRAPH_ENTITIES]
            rels = await repo.relations_touching(s, tenant, ns_id, [e.id for e in shown], MEMORY_GRAPH_RELATIONS + 1)
            own = {e.id for e in shown}
            far = [i for r in rels[:MEMORY_GRAPH_RELATIONS] for i in (r.source_id, r.target_id) if i not in own]
            others = await entities_repo.by_ids(s, tenant, ns_id, list(dict.fromkeys(far)))
        return MemoryGraph(
            memory_id=memory_id,
            entities=[entity_out(e, ns) for e in shown],
            neighbours=[entity_out(e, ns) for e in others.values()],
            relations=[relation_out(r, ns) for r in rels[:MEMORY_GRAPH_RELATIONS]],
            truncated=len(linked) > len(shown) or len(rels) > MEMORY_GRAPH_RELATIONS,
        )

    @operation("read")
    async def export_graph(
        self,
        p: Principal,
        ns: str,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        limit: int = 200,
    ) -> GraphExport:
        """The entity graph as nodes and edges a client can draw. With `user_id` and/or
        `session_id`: that user's or session's own memories linked to entities, those entities
        and the relations among them. Without: the namespace's newest entities, the relations
        among them and the shared (namespace-scope) memories linked to them. At most `limit`
        entities and `limit` memories (1-1000); `truncated` and `note` say when more were left."""
        p.require("read", ns)
        _bounded("limit", limit, 1, MAX_EXPORT)
        of: Literal["namespace", "user", "session"] = (
            "session" if session_id is not None else "user" if user_id is not None else "namespace"
        )
        left_out: list[str] = []
        async with self._open(p, ns, scope=None) as (tx, namespace):
            s, tenant, ns_id = tx.session, p.tenant_id, namespace.id
            if of == "namespace":
                entity_rows = await repo.newest_entities(s, tenant, ns_id, limit + 1)
                if len(entity_rows) > limit:
                    left_out.append(f"entities past the newest {limit}")
                entities = {e.id: e for e in entity_rows[:limit]}
                memories = await repo.shared_memories_of(s, tenant, ns_id, list(entities), limit + 1)
            else:
                memories = await repo.owned_memories(
                    s, tenant, ns_id, user_id=user_id, session_id=session_id, limit=limit + 1
                )
                entities = {}
            if len(memories) > limit:
                left_out.append(f"memories past the newest {limit}")
                memories = memories[:limit]
            mentions = await repo.links(s, tenant, [m.id for m in memories])
            if of != "namespace":
                wanted = list(dict.fromkeys(e for _, e in mentions))
                if len(wanted) > limit:
                    left_out.append(f"entities past {limit}")
                    wanted = wanted[:limit]
                entities = await entities_repo.by_ids(s, tenant, ns_id, wanted)
            relations, cut = await relations_repo.relations_among(s, tenant, ns_id, list(entities), None)
            if cut:
                left_out.append("relations past 1000")
        mentions = [(m, e) for m, e in mentions if e in entities]
        nodes = [
            GraphNode(id=e.id, kind="entity", label=e.name, type=e.type, created_at=e.created_at)
            for e in sorted(entities.values(), key=lambda e: (e.name.lower(), e.id))
        ] + [
            GraphNode(id=m.id, kind="memory", label=_label(m.content), type=m.type, created_at=m.created_at)
            for m in memories
        ]
        edges = [
            GraphEdge(
                id=str(r.id),
                kind="relation",
                source=r.source_id,
                target=r.target_id,
                label=r.type,
                valid_from=r.valid_from,
                valid_to=r.valid_to,
            )
            for r in relations
        ] + [GraphEdge(id=f"{m}:{e}", kind="mention", source=m, target=e, label="mentions") for m, e in mentions]
        return GraphExport(
            namespace=ns,
            of=of,
            user_id=user_id,
            session_id=session_id,
            nodes=nodes,
            edges=edges,
            counts={
                "entities": len(entities),
                "memories": len(memories),
                "relations": len(relations),
                "mentions": len(mentions),
            },
            truncated=bool(left_out),
            note=f"Left out: {', '.join(left_out)}. Narrow by user_id or session_id, or raise limit."
            if left_out
            else None,
        )
