"""The entity hop's statement (retrieval/hops.py): from the best first-stage hits to the memories
that share a specific entity with them, read under the search's own rules.

One statement, built once per filter form: the bridge entities (linked to a seed hit, not named
by the query, with few links), the memories linked to them that the search's read conditions let
through and that are not hits already, and each one's cosine to the query."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import Float, Integer, all_, any_, bindparam, cast, func, literal_column, select
from sqlalchemy.dialects.postgresql import ARRAY, distinct_on
from sqlalchemy.dialects.postgresql import UUID as PG_UUID
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased, defer

from memvault.entities.models import Entity, MemoryEntity
from memvault.memories import repository as memories_repo
from memvault.memories.models import Memory

SEEDS = bindparam("hop_seeds", type_=ARRAY(PG_UUID(as_uuid=True)))
EXCLUDE = bindparam("hop_exclude", type_=ARRAY(PG_UUID(as_uuid=True)))
NAMED = bindparam("hop_named", type_=ARRAY(PG_UUID(as_uuid=True)))
MAX_LINKS = bindparam("hop_max_links", type_=Integer)
LIMIT = bindparam("hop_limit", type_=Integer)
QUERY_VECTOR = bindparam("hop_query_vector", type_=Memory.embedding.type)
MODEL_ID = bindparam("hop_model_id", type_=Memory.embedding_model.type)


@lru_cache(maxsize=64)
def hop_statement(form: tuple[str, ...]) -> Any:
    """Rows (Memory, entity_id, entity name, seed position 1.., cosine to the query), best cosine
    first, at most ``hop_limit``; parameters: the hop_* above and the read conditions' own
    (``memories.repository.read_parameters``)."""
    tenant = bindparam("read_tenant_id", type_=PG_UUID(as_uuid=True))
    namespace = bindparam("read_namespace_id", type_=PG_UUID(as_uuid=True))
    seed_link = aliased(MemoryEntity)
    any_link = aliased(MemoryEntity)
    # An entity linked to many memories (the user, a speaker in every turn) says nothing about
    # which of them the question is after: counted up to one past the limit, then left out.
    links = (
        select(func.count())
        .select_from(
            select(literal_column("1"))
            .where(any_link.tenant_id == seed_link.tenant_id, any_link.entity_id == seed_link.entity_id)
            .limit(MAX_LINKS + 1)
            .subquery("some_links")
        )
        .scalar_subquery()
    )
    bridge = (
        select(
            seed_link.entity_id,
            func.min(func.array_position(SEEDS, seed_link.memory_id)).label("seed_pos"),
        )
        .where(
            seed_link.tenant_id == tenant,
            seed_link.memory_id == any_(SEEDS),
            seed_link.entity_id != all_(NAMED),
            links <= MAX_LINKS,
        )
        .group_by(seed_link.entity_id)
        .subquery("bridge")
    )
    linked = aliased(MemoryEntity)
    cosine = (1 - Memory.embedding.cosine_distance(QUERY_VECTOR)).label("hop_cosine")
    reached = (
        select(
            Memory.tenant_id,
            Memory.id,
            bridge.c.entity_id,
            bridge.c.seed_pos,
            cosine,
        )
        .select_from(bridge)
        .join(linked, (linked.tenant_id == tenant) & (linked.entity_id == bridge.c.entity_id))
        .join(Memory, (Memory.tenant_id == linked.tenant_id) & (Memory.id == linked.memory_id))
        .where(
            # The search's own read conditions: the scope chain (another user's or session's
            # memories stay out), lifecycle, time and every filter the request set.
            *memories_repo.bound_read_conditions(form),
            Memory.id != all_(EXCLUDE),
            Memory.embedding_model == MODEL_ID,
            Memory.embedding.is_not(None),
        )
        # A memory reached through two bridges keeps its best (the earliest seed's) path.
        .order_by(Memory.id, bridge.c.seed_pos)
        .ext(distinct_on(Memory.id))
        .subquery("reached")
    )
    return (
        select(
            Memory,
            reached.c.entity_id,
            Entity.name,
            reached.c.seed_pos,
            cast(reached.c.hop_cosine, Float).label("hop_cosine"),
        )
        .select_from(reached)
        .join(Memory, (Memory.tenant_id == reached.c.tenant_id) & (Memory.id == reached.c.id))
        .join(Entity, (Entity.tenant_id == reached.c.tenant_id) & (Entity.id == reached.c.entity_id))
        .where(Entity.namespace_id == namespace)
        .options(defer(Memory.embedding), defer(Memory.tsv))
        .order_by(reached.c.hop_cosine.desc(), reached.c.id)
        .limit(LIMIT)
    )


async def reached_rows(s: AsyncSession, form: tuple[str, ...], params: dict[str, Any]) -> Sequence[Any]:
    """``hop_statement(form)`` run with ``params``."""
    return (await s.execute(hop_statement(form), params)).all()
