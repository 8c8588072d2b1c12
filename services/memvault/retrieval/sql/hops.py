"""The entity hop's statements (retrieval/hops.py): from the best first-stage hits to the memories
that share a specific entity with them, read under the search's own rules.

Two statements, so that the common case costs one small lookup: ``bridges`` (the seeds' entities
of the search's namespace, not named by the query, with few links: a few index probes), and only
when there are some, ``reached`` (the memories linked to those, each read by its key under the
search's read conditions). As one statement the planner was free to start from the memories and
join the bridges to them: a scan of the namespace's rows (28 ms a search at 100,000 memories
where the search itself took 95, docs/benchmarks.md)."""

from __future__ import annotations

import uuid
from functools import lru_cache
from typing import Any

from sqlalchemy import Float, Integer, all_, and_, any_, bindparam, cast, literal_column, select, true
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import UUID as PG_UUID
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from memvault.db.session import on_citus
from memvault.entities.models import Entity, MemoryEntity
from memvault.memories import reads_repository as memory_reads
from memvault.memories.models import Memory
from memvault.retrieval.sql.common import building, by_key, routed

UUIDS = ARRAY(PG_UUID(as_uuid=True))
TENANT = bindparam("read_tenant_id", type_=PG_UUID(as_uuid=True))
NAMESPACE = bindparam("read_namespace_id", type_=PG_UUID(as_uuid=True))
SEEDS = bindparam("hop_seeds", type_=UUIDS)
NAMED = bindparam("hop_named", type_=UUIDS)
MAX_LINKS = bindparam("hop_max_links", type_=Integer)
BRIDGES = bindparam("hop_bridges", type_=UUIDS)
EXCLUDE = bindparam("hop_exclude", type_=UUIDS)
LIMIT = bindparam("hop_limit", type_=Integer)
QUERY_VECTOR = bindparam("hop_query_vector", type_=Memory.embedding.type)
MODEL_ID = bindparam("hop_model_id", type_=Memory.embedding_model.type)


@lru_cache(maxsize=2)
def _bridges_statement(routed: bool) -> Any:
    """``routed``: for Citus, where every read names the tenant (sql/common.routed)."""
    seed_link, any_link = aliased(MemoryEntity), aliased(MemoryEntity)
    # An entity linked to many memories (the user, a speaker in every turn) says nothing about
    # which of them the question is after: it is a hub if it has a link past the limit (an
    # index probe that stops there, however many links the entity has).
    hub = (
        select(literal_column("1"))
        .where(
            any_link.tenant_id == seed_link.tenant_id,
            any_link.entity_id == seed_link.entity_id,
            *([any_link.tenant_id == TENANT] if routed else []),
        )
        .offset(MAX_LINKS)
        .limit(1)
        .correlate(seed_link)
        .exists()
    )
    return (
        select(seed_link.memory_id, seed_link.entity_id, Entity.name)
        .join(Entity, (Entity.tenant_id == seed_link.tenant_id) & (Entity.id == seed_link.entity_id))
        .where(
            seed_link.tenant_id == TENANT,
            seed_link.memory_id == any_(SEEDS),
            seed_link.entity_id != all_(NAMED),
            Entity.namespace_id == NAMESPACE,
            ~hub,
        )
    )


async def bridges(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    seeds: list[uuid.UUID],
    named: list[uuid.UUID],
    max_links: int,
) -> list[tuple[uuid.UUID, uuid.UUID, str]]:
    """(seed memory id, entity id, entity name) for each entity of the namespace linked to a seed,
    not in ``named``, linked to at most ``max_links`` memories."""
    params = {
        "read_tenant_id": tenant_id,
        "read_namespace_id": namespace_id,
        "hop_seeds": seeds,
        "hop_named": named,
        "hop_max_links": max_links,
    }
    return [(r[0], r[1], r[2]) for r in (await s.execute(_bridges_statement(on_citus()), params)).all()]


@lru_cache(maxsize=64)
def _reached_statement(form: tuple[str, ...]) -> Any:
    # A form without the system tenant is Citus' (memories.reads_repository._values).
    with building("system_tenant" not in form):
        return _reached(form)


def _reached(form: tuple[str, ...]) -> Any:
    linked = (
        select(MemoryEntity.tenant_id, MemoryEntity.memory_id, MemoryEntity.entity_id)
        .where(
            MemoryEntity.tenant_id == TENANT,
            MemoryEntity.entity_id == any_(BRIDGES),
            MemoryEntity.memory_id != all_(EXCLUDE),
        )
        .subquery("linked")
    )
    cosine = 1 - Memory.embedding.cosine_distance(QUERY_VECTOR)
    # Each linked memory read by its key, and only if the search's read conditions let it
    # through: the scope chain (another user's or session's memories stay out), lifecycle, time
    # and every filter the request set.
    row = by_key(
        linked.c.tenant_id,
        linked.c.memory_id,
        [cast(cosine, Float).label("hop_cosine")],
        [*memory_reads.bound_read_conditions(form), Memory.embedding_model == MODEL_ID, Memory.embedding.is_not(None)],
        "reached_row",
    )
    best = (
        select(linked.c.tenant_id, linked.c.memory_id, linked.c.entity_id, row.c.hop_cosine)
        .select_from(linked)
        .join(row, true())
        .order_by(row.c.hop_cosine.desc(), linked.c.memory_id)
        .limit(LIMIT)
        .subquery("best")
    )
    return (
        select(Memory, best.c.entity_id, best.c.hop_cosine)
        .select_from(best)
        .join(Memory, and_(Memory.tenant_id == best.c.tenant_id, Memory.id == best.c.memory_id, *routed()))
        .order_by(best.c.hop_cosine.desc(), best.c.memory_id)
    )


async def reached(
    s: AsyncSession,
    form: tuple[str, ...],
    read_params: dict[str, Any],
    *,
    bridge_ids: list[uuid.UUID],
    exclude: list[uuid.UUID],
    query_vector: list[float],
    model_id: str,
    limit: int,
) -> list[tuple[Memory, uuid.UUID, float]]:
    """(memory, bridge entity id, cosine to the query) for the memories linked to ``bridge_ids``
    that the read conditions of ``form`` (with ``read_params``) let through, not in ``exclude``,
    best cosine first, at most ``limit`` rows (a memory linked to two bridges may come twice)."""
    params = {
        **read_params,
        "hop_bridges": bridge_ids,
        "hop_exclude": exclude,
        "hop_query_vector": query_vector,
        "hop_model_id": model_id,
        "hop_limit": limit,
    }
    rows = (await s.execute(_reached_statement(form), params)).all()
    return [(r[0], r[1], float(r[2])) for r in rows]
