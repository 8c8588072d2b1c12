"""The preference and fact part of the facade: structured statements stored as keyed memories
(memories/service.py supersedes by key), and, for a fact between two known entities, a relation
in the entity graph that ends when a later fact with the same subject and predicate replaces it."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, cast

from pydantic import ValidationError

from memvault.entities import relations_repository as relations_repo
from memvault.entities import repository as entities_repo
from memvault.entities.models import Entity
from memvault.entities.schemas import RelationIn
from memvault.entities.service import relation_out
from memvault.errors import InvalidInput
from memvault.facade import FacadeBase
from memvault.facts.schemas import FactIn, FactOut, PreferenceIn
from memvault.memories.repository import owner_of
from memvault.memories.schemas import MemoryIn, MemoryOut, MemoryType, ScopeLevel
from memvault.operations import operation
from memvault.principal import Principal

if TYPE_CHECKING:
    from memvault.api import NamespaceAPI

# Entities live in a namespace: tenant- and system-wide memories cannot link to them.
LINKABLE = (ScopeLevel.namespace, ScopeLevel.user, ScopeLevel.session)
# Relations are read by every member of the namespace (entity_get, list_relations): a fact private
# to a user or a session links its memory to the entities, but adds no relation others would see.
RELATES = (ScopeLevel.namespace,)


def _memory_in(**fields: Any) -> MemoryIn:
    """The memory a preference or fact becomes; its rules (scope needs its owner) read as the caller's input errors."""
    try:
        return MemoryIn(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        message = str(first["msg"]).removeprefix("Value error, ")
        raise InvalidInput(f"{field}: {message}" if field else message, extra={"field": field}) from exc


def _owned(body: PreferenceIn | FactIn) -> dict[str, Any]:
    return {
        "scope": body.scope,
        "user_id": body.user_id,
        "agent_id": body.agent_id,
        "session_id": body.session_id,
        "confidence": body.confidence,
    }


class FactOps(FacadeBase):
    @operation("write")
    async def add_preference(self, p: Principal, ns: str, body: PreferenceIn) -> MemoryOut:
        """Store a preference as the memory keyed `preference:<category>`: a later preference of
        the same category (and owner) supersedes it, and it stays in history."""
        memory = _memory_in(
            content=body.sentence(),
            type=MemoryType.preference,
            key=body.key,
            metadata={
                "category": body.category,
                "preference": body.preference,
                **({"context": body.context} if body.context else {}),
            },
            **_owned(body),
        )
        return await cast("NamespaceAPI", self).store(p, ns, memory)

    @operation("write")
    async def add_fact(self, p: Principal, ns: str, body: FactIn) -> FactOut:
        """Store a fact (subject, predicate, object) as the memory keyed `fact:<subject>:<predicate>`,
        valid from `valid_from` until `valid_until`: a later fact with the same subject and predicate
        supersedes it. When subject and object each name one entity of the namespace (by name or
        alias, any case), the memory is linked to both, and a namespace-wide fact also records the
        relation subject --predicate--> object; the relation an earlier version recorded ends where
        the new one starts."""
        p.require("write", ns)
        memory = _memory_in(
            content=body.sentence(),
            type=MemoryType.fact,
            key=body.key,
            metadata={"subject": body.subject, "predicate": body.predicate, "object": body.object},
            valid_from=body.valid_from,
            valid_to=body.valid_until,
            **_owned(body),
        )
        subject = target = None
        if memory.level in LINKABLE:
            async with self._open(p, ns, None) as (tx, namespace):
                subject = await self._one_entity(tx.session, p.tenant_id, namespace.id, body.subject)
                target = await self._one_entity(tx.session, p.tenant_id, namespace.id, body.object)
            memory.entity_ids = list(dict.fromkeys(e.id for e in (subject, target) if e is not None))
        stored = await cast("NamespaceAPI", self).store(p, ns, memory)
        if memory.level not in LINKABLE:
            return FactOut(memory=stored, relation=None)
        # The same subject and predicate of the same owner: the relations of earlier versions.
        fact_key = f"{memory.level.value}/{owner_of(memory.level.value, body.user_id, body.session_id)}/{body.key}"
        relation = None
        async with self._open(p, ns, None) as (tx, namespace):
            kind = body.relation_type
            if (
                memory.level in RELATES
                and subject is not None
                and target is not None
                and subject.id != target.id
                and kind is not None
            ):
                r = await relations_repo.open_relation(
                    tx.session, p.tenant_id, namespace.id, subject.id, kind, target.id, body.valid_until
                )
                if r is None:
                    rel = RelationIn(
                        source_id=subject.id,
                        type=kind,
                        target_id=target.id,
                        valid_from=body.valid_from,
                        valid_to=body.valid_until,
                        confidence=body.confidence,
                        metadata={"fact_key": fact_key, "memory_id": str(stored.id)},
                    )
                    r = await relations_repo.insert_relation(tx.session, p.tenant_id, namespace.id, rel, p.subject)
                    await self._audit(
                        tx,
                        p,
                        "relation.create",
                        namespace_id=namespace.id,
                        target_id=str(r.id),
                        detail={"type": r.type, "source_id": str(r.source_id), "target_id": str(r.target_id)},
                    )
                relation = relation_out(r, ns)
            if stored.supersedes is not None:
                await relations_repo.end_fact_relations(
                    tx.session,
                    p.tenant_id,
                    namespace.id,
                    fact_key,
                    keep_id=relation.id if relation else uuid.UUID(int=0),
                    at=body.valid_from,
                )
        return FactOut(memory=stored, relation=relation)

    @staticmethod
    async def _one_entity(s: Any, tenant_id: uuid.UUID, namespace_id: uuid.UUID, name: str) -> Entity | None:
        """The entity ``name`` names, if exactly one does: two of that name leave the fact unlinked."""
        found = await entities_repo.by_name_or_alias(s, tenant_id, namespace_id, name)
        return found[0] if len(found) == 1 else None
