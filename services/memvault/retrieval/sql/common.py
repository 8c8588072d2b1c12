"""Constants and expressions every stage of the search statement shares."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from sqlalchemy import Text, bindparam, cast, func, literal_column, select, true
from sqlalchemy.dialects.postgresql import TSQUERY
from sqlalchemy.dialects.postgresql import UUID as PG_UUID

from memvault.memories import reads_repository as memory_reads
from memvault.memories.models import Memory

RRF_K = 60
# Priors are ranked on coarse buckets so that near-equal values tie (rank() gives ties one rank):
# memories stored minutes apart are equally recent at a 30-day half-life, and a prior that cannot
# tell candidates apart adds the same to each instead of reordering them at random.
BUCKETS = 20
LN2 = 0.6931471805599453
# The context channel looks up the session neighbours of each channel's best candidates only:
# on LoCoMo, those of the best 15 find as much evidence as those of all 50 (0.757 against 0.756
# recall@10), and among 100,000 memories more (fewer distractors lent a match), with less than
# half the probes and rows to score (docs/benchmarks.md).
CONTEXT_PROBED = 15

# Whether the statement being built is for Citus (Shape.routed): set by statement_for while it builds.
_routed: ContextVar[bool] = ContextVar("memvault_routed_build", default=False)


@contextmanager
def building(routed: bool) -> Iterator[None]:
    """Build a statement for Citus (``routed``) or one node within the block."""
    token = _routed.set(routed)
    try:
        yield
    finally:
        _routed.reset(token)


def routed(model: Any = Memory) -> list[Any]:
    """On Citus, the condition that keeps a read of ``model`` by a candidate's key on the
    statement's tenant's shard: Citus routes a statement to one worker only when it can tell from
    each table's conditions that they all name one tenant, and a key taken from another part of
    the statement does not tell it.
    Nothing on one node, where the docstring of ``by_key`` says why the tenant is left out."""
    if not _routed.get():
        return []
    # One value: Citus' router planner does not route a lateral read by ``IN`` of two values
    # even when both name one shard ("cannot push down this subquery"). The system tenant's
    # shared rows are read as the system tenant (memories/split.py), so the read's tenant is it.
    return [model.tenant_id == bindparam("read_tenant_id", type_=PG_UUID(as_uuid=True))]


def lexical_query(query: Any) -> Any:
    """Any of the query's words, not all of them: natural-language questions rarely share every
    word with the memory that answers them. Stop words are dropped by the english parser."""
    return cast(func.replace(cast(func.plainto_tsquery("english", query), Text), "&", "|"), TSQUERY)


def decay(age_s: Any, half_life_s: Any) -> Any:
    # At most MAX_HALF_LIVES: PostgreSQL raises on exp() underflow (a memory dated centuries before
    # the reference time made every search touching it a 500), and 2^-1000 is zero for ranking.
    return func.exp(-LN2 * func.least(func.greatest(age_s, 0.0) / half_life_s, memory_reads.MAX_HALF_LIVES))


def session_order(model: Any) -> tuple[Any, Any]:
    """A memory's place in its session: valid time, then insertion order (the last two columns of
    the session index, migration 0009)."""
    return memory_reads.date_of(model), model.seq


def by_key(tenant_id: Any, memory_id: Any, columns: list[Any], conditions: list[Any], name: str) -> Any:
    """``columns`` of the memory with the primary key (``tenant_id``, ``memory_id``), columns of
    the query it is joined to, if it meets ``conditions``: looked up by that key row by row,
    whatever the statistics say.

    Joined plainly, the candidates were matched against the tenant's rows however the statistics
    suggested, and statistics that do not know the tenant (a first import before autovacuum
    analyzes it, a new tenant in a table of others) suggested a loop over every row of the tenant
    for each candidate. Behind OFFSET 0 the LATERAL lookup is planned on its own, with the outer
    row's key as parameters (as migration 0014's lookups are). The tenant is the candidate's own
    (the candidate functions return it, migration 0016), not the search's: with the tenant a
    constant (or a list of two), PostgreSQL prices any index that starts with the tenant like
    the primary key when it expects the tenant to have no rows, and took one of those, reading
    the tenant's rows for every candidate (docs/benchmarks.md, "Small namespaces")."""
    return (
        select(*columns)
        .where(Memory.tenant_id == tenant_id, Memory.id == memory_id, *conditions, *routed())
        .correlate_except(Memory)
        .offset(literal_column("0"))
        .lateral(name)
    )


def passing(rows: Any, tenant_id: Any, memory_id: Any, conditions: list[Any], name: str) -> Any:
    """``rows`` (a subquery) less those whose memory (``tenant_id``, ``memory_id``, columns of
    ``rows``) fails ``conditions``, each memory read by key (``by_key``)."""
    row = by_key(tenant_id, memory_id, [Memory.id], conditions, name)
    return select(*rows.c).select_from(rows).join(row, true())


def first_passing(found: Any, where: list[Any], *, before: bool, limit: Any, name: str) -> Any:
    """Of ``found`` (tenant_id, id: a probe function's nearest memories on one side of a memory in
    its conversation, migrations 0033 and 0039), the first ``limit`` in session order that pass
    ``where``, each read by its key (``by_key``) through row-level security. The probes run as the
    table owner so that the place in session order is an index condition (COALESCE is not
    LEAKPROOF). Joined plainly, a small tenant's rows were read whole and hashed instead."""
    order_at, order_seq = session_order(Memory)
    columns = [Memory.tenant_id.label("tenant_id"), Memory.id.label("id"), order_at.label("ord"), order_seq]
    row = by_key(found.c.tenant_id, found.c.id, columns, where, name)
    return (
        select(row.c.tenant_id, row.c.id)
        .select_from(found)
        .join(row, true())
        .order_by(*(c.desc() if before else c for c in (row.c.ord, row.c.seq)))
        .limit(limit)
    )
