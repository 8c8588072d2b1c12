"""Queries of the maintenance jobs. Every function filters by tenant and namespace explicitly;
they run inside the job's tenant transaction, under row-level security as well."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, select, text, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from memvault.db.session import set_local
from memvault.entities.models import MemoryEntity
from memvault.memories.models import Memory
from memvault.memories.reads_repository import strength_of

# Current and not archived: what dedup, decay and search work on.
LIVE = "m.superseded_at IS NULL AND m.state <> 'archived'"
# The merge representative comes first: stable over tentative, then importance, recall, age.
PRIORITY = "(m.state = 'stable') DESC, m.importance DESC, m.access_count DESC, m.created_at, m.id"
# Two memories may be the same fact only with the same scope, owner, type, key and valid time.
SAME_SLOT = """
    b.scope = m.scope AND b.type = m.type
    AND b.user_id IS NOT DISTINCT FROM m.user_id AND b.session_id IS NOT DISTINCT FROM m.session_id
    AND b.agent_id IS NOT DISTINCT FROM m.agent_id AND b.key IS NOT DISTINCT FROM m.key
    AND b.valid_from IS NOT DISTINCT FROM m.valid_from AND b.valid_to IS NOT DISTINCT FROM m.valid_to
"""


@dataclass(frozen=True)
class Candidate:
    id: uuid.UUID
    content: str
    rank: tuple[Any, ...]


async def exact_groups(s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID) -> list[list[uuid.UUID]]:
    """Live memories with the same normalised text in the same slot, best first in each group."""
    rows = await s.execute(
        text(
            f"""
            SELECT array_agg(m.id ORDER BY {PRIORITY}) FROM memories m
            WHERE m.tenant_id = :t AND m.namespace_id = :n AND {LIVE}
            GROUP BY m.scope, m.type, m.user_id, m.session_id, m.agent_id, m.key, m.valid_from, m.valid_to,
                     m.content_hash
            HAVING count(*) > 1
            """
        ),
        {"t": tenant_id, "n": namespace_id},
    )
    return [list(ids) for (ids,) in rows.all()]


def _near_sql(*, exact: bool, named: bool) -> str:
    """The near-pairs statement: a lateral nearest-neighbour lookup per memory of the batch (the
    next ``:batch`` live ones by id after ``:after``, or, ``named``, those in ``:ids``).

    ``exact`` orders by similarity, an order no HNSW index serves, so the plan reads the memory's
    slot and sorts it whatever the transaction's settings or a cached plan would prefer. The index
    probe orders by distance (the HNSW scan) and asks for the memory itself too: a probe that does
    not find it has not reached its part of the graph (see near_pairs)."""
    pick = "m.id = ANY(:ids)" if named else "(CAST(:after AS uuid) IS NULL OR m.id > CAST(:after AS uuid))"
    # Only rows in the graph are the index's (migration 0036); one kept out of it does not find
    # itself in its probe and is looked up again exactly, as an island's memory is.
    nearest = "AND b.id <> m.id ORDER BY sim DESC" if exact else "AND b.in_graph ORDER BY b.embedding <=> m.embedding"
    return f"""
        WITH a AS (
            SELECT m.* FROM memories m
            WHERE m.tenant_id = :t AND m.namespace_id = :n AND {LIVE}
              AND m.embedding_model = :model AND m.embedding IS NOT NULL AND {pick}
            ORDER BY m.id LIMIT :batch
        )
        SELECT m.id, nb.id, nb.sim FROM a m
        LEFT JOIN LATERAL (
            SELECT b.id, 1 - (b.embedding <=> m.embedding) AS sim FROM memories b
            WHERE b.tenant_id = :t AND b.namespace_id = :n
              AND b.superseded_at IS NULL AND b.state <> 'archived'
              AND b.embedding_model = :model AND {SAME_SLOT}
              {nearest} LIMIT :k
        ) nb ON true
    """


async def near_pairs(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    *,
    model_id: str,
    threshold: float,
    after: uuid.UUID | None,
    batch: int,
    use_index: bool,
    neighbours: int = 5,
) -> tuple[list[tuple[uuid.UUID, uuid.UUID, float]], uuid.UUID | None]:
    """For the next ``batch`` live memories by id, their nearest live neighbours in the same slot
    with cosine >= threshold (each pair once). One statement: a lateral nearest-neighbour lookup
    per memory, exact (the slot read and sorted).

    ``use_index`` (for large namespaces) makes each lookup an HNSW index scan: ~1 ms instead of a
    scan of the namespace, but approximate. A namespace that is most of the table looks cheaper to
    scan to the planner, and is not: the scan runs once per memory. Small namespaces keep the exact
    lookup. The index is one graph of every tenant's rows. Where many
    rows hold one same vector (a text stored a thousand times, by one tenant or many: the same
    model gives the same bits), their graph elements fill each other's neighbour lists, and a
    memory inserted near them gets no link in: no scan from the entry point reaches it, however
    wide its beam (pgvector prunes the new link from a list of exact copies). A probe that does not
    find its own memory has met such an island, and one that finds fewer neighbours than asked ran
    out of graph or of ``hnsw.max_scan_tuples`` first (or its slot is that small): those memories
    are looked up again exactly, in a second statement (issue 25, docs/benchmarks-journal.md).

    Returns the pairs and the last id looked at (None when the namespace is done)."""
    params: dict[str, Any] = {"t": tenant_id, "n": namespace_id, "model": model_id, "after": after, "batch": batch}
    if use_index:
        # A near-duplicate is by definition among the very nearest: a small beam finds it.
        # Nor may it read the namespace by another index and sort it: only HNSW gives the order.
        await set_local(
            s,
            {
                **dict.fromkeys(("enable_seqscan", "enable_bitmapscan", "enable_sort"), "off"),
                "hnsw.ef_search": "20",
                "hnsw.iterative_scan": "relaxed_order",
            },
        )
    probe = _near_sql(exact=not use_index, named=False)
    # The index probe asks for one more: the memory itself.
    rows = (await s.execute(text(probe), {**params, "k": neighbours + 1 if use_index else neighbours})).all()
    if not rows:
        return [], None
    # PostgreSQL orders uuids bytewise, as Python's UUID does: the keyset carries over.
    last = max(a for a, _, _ in rows)
    if use_index:
        found: dict[uuid.UUID, list[uuid.UUID | None]] = {}
        for a, b, _ in rows:
            found.setdefault(a, []).append(b)
        again = {a for a, near in found.items() if a not in near or len(near) <= neighbours}
        rows = [r for r in rows if r[0] != r[1] and r[0] not in again]
        if again:
            exact = _near_sql(exact=True, named=True)
            rows += (await s.execute(text(exact), {**params, "ids": sorted(again), "k": neighbours})).all()
    pairs: dict[tuple[uuid.UUID, uuid.UUID], float] = {}
    for a, b, sim in rows:
        if b is not None and sim is not None and sim >= threshold:
            pairs[(min(a, b), max(a, b))] = float(sim)
    return [(a, b, sim) for (a, b), sim in pairs.items()], last


async def count_live(s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID) -> int:
    return int(
        await s.scalar(
            select(func.count()).where(
                Memory.tenant_id == tenant_id,
                Memory.namespace_id == namespace_id,
                Memory.superseded_at.is_(None),
                Memory.state != "archived",
            )
        )
        or 0
    )


async def candidates(s: AsyncSession, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Candidate]:
    rows = await s.execute(
        select(
            Memory.id,
            Memory.content,
            Memory.state,
            Memory.importance,
            Memory.access_count,
            Memory.created_at,
        ).where(Memory.tenant_id == tenant_id, Memory.id.in_(list(ids)))
    )
    return {
        i: Candidate(i, content, (state != "stable", -importance, -access, created, i))
        for i, content, state, importance, access, created in rows.all()
    }


async def lock_live(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, Memory]:
    """The still-live memories among ids, locked until the transaction ends."""
    rows = await s.scalars(
        select(Memory)
        .where(
            Memory.tenant_id == tenant_id,
            Memory.namespace_id == namespace_id,
            Memory.id.in_(list(ids)),
            Memory.superseded_at.is_(None),
            Memory.state != "archived",
        )
        .order_by(Memory.id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    return {m.id: m for m in rows.all()}


async def merge(
    s: AsyncSession, tenant_id: uuid.UUID, rep: Memory, dups: Sequence[Memory]
) -> tuple[Memory, list[Memory]]:
    """Fold ``dups`` into ``rep``: it cites their events, counts their mentions, lists them in
    metadata.merged_from and takes their entity links; they are superseded by it, not deleted."""
    cited = list(dict.fromkeys([*rep.source_event_ids, *(e for d in dups for e in d.source_event_ids)]))

    def mentions(m: Memory) -> int:
        value = m.metadata_.get("mentions")
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 1 else 1

    merged_from = rep.metadata_.get("merged_from")
    metadata = {
        **rep.metadata_,
        "mentions": mentions(rep) + sum(mentions(d) for d in dups),
        "merged_from": [*(merged_from if isinstance(merged_from, list) else []), *(str(d.id) for d in dups)],
    }
    kept = await s.scalar(
        update(Memory)
        .where(Memory.tenant_id == tenant_id, Memory.id == rep.id)
        .values(source_event_ids=cited, metadata_=metadata, updated_at=func.now())
        .returning(Memory),
        execution_options={"synchronize_session": False, "populate_existing": True},
    )
    assert kept is not None  # locked by lock_live
    gone = await s.scalars(
        update(Memory)
        .where(Memory.tenant_id == tenant_id, Memory.id.in_([d.id for d in dups]))
        .values(superseded_at=func.statement_timestamp(), superseded_by=rep.id, updated_at=func.now())
        .returning(Memory),
        execution_options={"synchronize_session": False, "populate_existing": True},
    )
    links = (
        select(
            MemoryEntity.tenant_id,
            # Cast coerces the id into a bound parameter; its stubs accept only SQL expressions.
            func.cast(rep.id, MemoryEntity.memory_id.type),  # type: ignore[arg-type]
            MemoryEntity.entity_id,
        )
        .where(MemoryEntity.tenant_id == tenant_id, MemoryEntity.memory_id.in_([d.id for d in dups]))
        .distinct()
    )
    await s.execute(
        insert(MemoryEntity)
        .from_select(["tenant_id", "memory_id", "entity_id"], links)
        .on_conflict_do_nothing(index_elements=["tenant_id", "memory_id", "entity_id"])
    )
    return kept, list(gone.all())


def strength_sql(half_life_days: float) -> str:
    """Strength (memories.reads_repository.strength_of, the one definition search also ranks by) as SQL
    text over a memories row aliased ``m``."""
    m = aliased(Memory, name="m")
    expr = strength_of(m, now=func.now(), half_life_days=half_life_days)
    return str(expr.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))


async def _update_returning(s: AsyncSession, sql: str, params: dict[str, Any]) -> list[Memory]:
    stmt = select(Memory).from_statement(text(sql).bindparams(**params))
    rows = await s.scalars(stmt, execution_options={"populate_existing": True})
    return list(rows.all())


async def archive_weak(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, *, half_life_days: float, below: float, batch: int
) -> list[Memory]:
    """Archive up to ``batch`` live memories whose strength is below ``below``."""
    return await _update_returning(
        s,
        f"""
        UPDATE memories SET state = 'archived', updated_at = now()
        WHERE tenant_id = :t AND id IN (
            SELECT m.id FROM memories m WHERE m.tenant_id = :t AND m.namespace_id = :n AND {LIVE}
              AND {strength_sql(half_life_days)} < :below
            ORDER BY m.id LIMIT :batch FOR UPDATE SKIP LOCKED)
        RETURNING *
        """,
        {"t": tenant_id, "n": namespace_id, "below": below, "batch": batch},
    )


async def promote_reinforced(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, *, min_mentions: int, min_accesses: int, batch: int
) -> list[Memory]:
    """Make stable up to ``batch`` current tentative memories mentioned or recalled often enough.
    A `mentions` that is not a number (metadata is the caller's) counts as one mention."""
    return await _update_returning(
        s,
        """
        UPDATE memories SET state = 'stable', updated_at = now()
        WHERE tenant_id = :t AND id IN (
            SELECT m.id FROM memories m WHERE m.tenant_id = :t AND m.namespace_id = :n
              AND m.superseded_at IS NULL AND m.state = 'tentative'
              AND (m.access_count >= :acc OR (jsonb_typeof(m.metadata -> 'mentions') = 'number'
                                              AND (m.metadata ->> 'mentions')::numeric >= :men))
            ORDER BY m.id LIMIT :batch FOR UPDATE SKIP LOCKED)
        RETURNING *
        """,
        {"t": tenant_id, "n": namespace_id, "acc": min_accesses, "men": min_mentions, "batch": batch},
    )


def other_model_probe(namespace_id: Any, model_id: str | ColumnElement[str]):  # type: ignore[no-untyped-def]
    """Whether some live memory of the namespace has no vector of ``model_id``, as a boolean
    expression (``namespace_id`` a value or a column): three probes of ix_memories_model (below,
    above, NULL) instead of a scan of the namespace, since every search asks. Through
    memvault_has_other_model (migration 0008): under RLS the planner may not use the index for a
    text comparison. The function reads the tenant from ``app.tenant_id``; its plan is only good
    for the values given (a generic plan scans the namespace), see NamespaceAPI.search."""
    return func.memvault_has_other_model(namespace_id, model_id)


async def count_other_model(s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, model_id: str) -> int:
    """Memories of the namespace (every version and state: time-travel reads use them too)
    without a vector of ``model_id``."""
    return int(
        await s.scalar(
            select(func.count()).where(
                Memory.tenant_id == tenant_id,
                Memory.namespace_id == namespace_id,
                Memory.embedding_model.is_distinct_from(model_id),
            )
        )
        or 0
    )


async def next_to_reembed(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, model_id: str, batch: int
) -> list[tuple[uuid.UUID, str]]:
    rows = await s.execute(
        select(Memory.id, Memory.content)
        .where(
            Memory.tenant_id == tenant_id,
            Memory.namespace_id == namespace_id,
            Memory.embedding_model.is_distinct_from(model_id),
        )
        .order_by(Memory.id)
        .limit(batch)
    )
    return [(i, c) for i, c in rows.all()]


async def set_vectors(
    s: AsyncSession, tenant_id: uuid.UUID, model_id: str, vectors: Sequence[tuple[uuid.UUID, list[float]]]
) -> None:
    """Store new vectors. updated_at stays: a new vector of the same text is not a change of the memory."""
    await s.execute(
        update(Memory),
        [{"tenant_id": tenant_id, "id": i, "embedding": v, "embedding_model": model_id} for i, v in vectors],
    )


# ---- periodic maintenance (settings.maintenance of a namespace) -------------------------------

# The schedule's period in minutes, read from the namespace's settings (validated when written;
# the default stands in should it ever be missing).
_EVERY = (
    "COALESCE(CASE WHEN jsonb_typeof(settings #> '{maintenance,every_minutes}') = 'number' "
    "THEN (settings #>> '{maintenance,every_minutes}')::numeric::int END, 1440)"
)
# A namespace whose schedule is due: never run, or its period has passed since the last run.
_DUE = (
    "settings ? 'maintenance' "
    f"AND (maintenance_run_at IS NULL OR maintenance_run_at + make_interval(mins => {_EVERY}) <= :now)"
)


async def due_schedules(s: AsyncSession, now: datetime, *, limit: int) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """(tenant, namespace) of every namespace whose periodic maintenance is due, longest waiting
    first. Across tenants, so an owner session only: it returns ids, and each is then claimed in
    its own tenant's transaction."""
    rows = await s.execute(
        text(
            f"SELECT tenant_id, id FROM namespaces WHERE {_DUE} "
            "ORDER BY maintenance_run_at NULLS FIRST, tenant_id, id LIMIT :limit"
        ),
        {"now": now, "limit": limit},
    )
    return [(t, n) for t, n in rows.all()]


async def claim_schedule(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, now: datetime
) -> tuple[str, dict[str, Any]] | None:
    """Mark the namespace's scheduled maintenance as run at ``now`` if it is still due; returns its
    name and settings, or None. A compare-and-set: of two schedulers claiming at once, the second
    waits for the first's row lock, finds the run no longer due and gets None."""
    row = (
        await s.execute(
            text(
                f"UPDATE namespaces SET maintenance_run_at = :now WHERE tenant_id = :t AND id = :n AND {_DUE} "
                "RETURNING name, settings"
            ),
            {"now": now, "t": tenant_id, "n": namespace_id},
        )
    ).first()
    return None if row is None else (row[0], row[1])
