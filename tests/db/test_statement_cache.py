"""psycopg remembers how it converted the search statement: converting it again on every search
cost about 1.5 ms of Python (docs/benchmarks.md, "What a search's Python costs")."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from psycopg import _queries
from psycopg.adapt import Transformer
from sqlalchemy.dialects import postgresql

from memvault.db.session import cache_long_statements
from memvault.memories import reads_repository as memory_reads
from memvault.memories.schemas import MemoryFilters
from memvault.retrieval.schemas import CHANNELS
from memvault.retrieval.sql.shape import Shape
from memvault.retrieval.sql.statement import statement_for

EVERY_FILTER = MemoryFilters(
    type=["fact", "preference"],
    user_id="u",
    agent_id="a",
    session_id="s",
    state=["stable"],
    metadata={"k": "v"},
    scopes=["namespace", "user"],
    knowledge_at=datetime(2026, 1, 1, tzinfo=UTC),
    valid_at=datetime(2026, 1, 1, tzinfo=UTC),
    include_archived=True,
)


def _largest_shapes() -> list[Shape]:
    """The statement shapes with the most SQL: every channel, every filter or none."""
    shapes = []
    for filters in (MemoryFilters(), EVERY_FILTER):
        live = filters == MemoryFilters()
        shapes.append(
            Shape(
                filters=memory_reads.filter_form(filters),
                dense=True,
                nearest=live,
                bm25=True,
                live=live,
                own_words=False,
                used=tuple(CHANNELS),
                own=("dense", "lexical"),
                fusion="weighted",
                intent=True,
                graph=True,
                time="window",
            )
        )
    return shapes


@pytest.mark.parametrize("shape", _largest_shapes(), ids=["unfiltered", "every filter"])
def test_the_search_statement_is_converted_once(shape: Shape) -> None:
    assert cache_long_statements()
    compiled = statement_for(shape).stmt.compile(dialect=postgresql.psycopg.dialect())
    sql = str(compiled).encode()
    params = {name: None for name in compiled.params}
    # Every parameter SQLAlchemy sends counts, literals included.
    assert len(sql) <= _queries.MAX_CACHED_STATEMENT_LENGTH
    assert len(params) <= _queries.MAX_CACHED_STATEMENT_PARAMS

    _queries._query2pg.cache_clear()
    for _ in range(3):
        query = _queries.PostgresQuery(Transformer())
        query.convert(sql, params)
    info = _queries._query2pg.cache_info()
    assert (info.misses, info.hits) == (1, 2)
    assert b"$1" in query.query and b"%(" not in query.query


def test_bulk_statements_stay_out_of_the_cache() -> None:
    """An INSERT of many rows differs with every batch size: caching each would only churn."""
    assert cache_long_statements()
    names = [f"p{i}_{uuid.uuid4().hex[:4]}" for i in range(1000)]
    sql = ("INSERT INTO t (x) VALUES " + ", ".join(f"(%({n})s)" for n in names)).encode()
    _queries._query2pg.cache_clear()
    _queries.PostgresQuery(Transformer()).convert(sql, dict.fromkeys(names, 1))
    assert _queries._query2pg.cache_info().currsize == 0
