"""The search statement, assembled from its stages once per shape, and run."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import Row, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.db.session import set_local
from memvault.memories import reads_repository as memory_reads
from memvault.memories.models import Memory
from memvault.retrieval.sql.candidates import dense_candidates, fuse, lexical_candidates
from memvault.retrieval.sql.common import building
from memvault.retrieval.sql.context import candidate_pool, neighbour_edges
from memvault.retrieval.sql.fusion import Statement, fused_hits
from memvault.retrieval.sql.ranks import ranked_candidates
from memvault.retrieval.sql.shape import Params, Shape
from memvault.retrieval.sql.signals import candidate_signals


@lru_cache(maxsize=256)
def statement_for(shape: Shape) -> Statement:
    """``candidates -> context -> signals -> ranks -> fusion``, as one statement."""
    with building(shape.routed):
        return _statement(shape)


def _statement(shape: Shape) -> Statement:
    scan, keep = memory_reads.bound_read_split(shape.filters)
    where = [*scan, keep]
    # Implied by the scope chain, but said plainly it lets the scans inside the statement (a
    # filtered search's, ts_rank_cd's) start from the tenant-led indexes instead of skipping
    # through every tenant's part of them. Candidates found elsewhere are read by key (common.by_key).
    # On Citus the system tenant's rows are read by a statement of their own (memories/split.py).
    visible = (
        Memory.tenant_id == Params.tenant_id
        if shape.routed
        else Memory.tenant_id.in_([Params.tenant_id, Params.system_tenant])
    )
    lex_inner = lexical_candidates(shape, where, visible)
    dense_inner = dense_candidates(shape, list(scan), keep, visible)
    # Read again by the neighbour lookups: computed once.
    fused = select(fuse(lex_inner, dense_inner, func.rank)).cte("fused")
    edges = neighbour_edges(fused, list(scan), keep, shape.inferred) if "context" in shape.used else None
    pool = candidate_pool(fused, edges)
    ranked = ranked_candidates(shape, candidate_signals(shape, pool))
    return fused_hits(shape, ranked, edges)


async def search_rows(
    s: AsyncSession, prepared: Statement, params: dict[str, Any], settings: dict[str, str] | None
) -> Sequence[Row[Any]]:
    """The rows of ``prepared`` run with ``params``, the transaction's ``settings`` set first
    (None: the caller has set them already).

    Prepared on the connection at its first run, not at psycopg's fifth: PostgreSQL spends 20-35 ms
    planning this statement, and an unfiltered search keeps its plan only once prepared
    (sql/settings.py, plan_cache_mode). At the fifth run, each of the pool's connections planned
    each shape four times for nothing, which under load was most of the searches of a
    minute's run (issue 25, docs/benchmarks.md). A filtered search is planned per call either way
    and is spared the parsing. The shapes are a few dozen; psycopg keeps 100 prepared statements per
    connection, least recently used first out."""
    if settings is not None:
        await set_local(s, settings)
    connection = await s.connection()
    driver = (await connection.get_raw_connection()).driver_connection
    assert driver is not None  # a checked-out connection has its psycopg connection
    threshold = driver.prepare_threshold
    if threshold is not None:  # None: the deployment turned preparing off (a transaction pooler)
        driver.prepare_threshold = 0
    try:
        return (await s.execute(prepared.stmt, params)).all()
    finally:
        driver.prepare_threshold = threshold
