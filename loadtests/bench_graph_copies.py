"""What ``memvault_nearest_keyed`` costs the unfiltered search as it is against its earlier
versions, on one database, alternating: migration 0036's (the graph's rows by the index, UNION ALL
the slot's rows out of the graph, no exact read when the index part comes back short) and, with
``--graph-only``, that one's first branch alone (before 0036). With ``--filtered``, the same for
the filtered search's nearest read (``retrieval/sql/candidates.dense_inner``), as it is and in
0036's shape.

Point it at the owner URL of a seeded memvault database, e.g. one that
``bench_cpu_per_request.py --hold`` keeps up (its PostgreSQL is ``postgres`` on the socket folder
``<stack>/pg``):

    PYTHONPATH=services .venv/bin/python loadtests/bench_graph_copies.py --seconds 10 --rounds 4 \\
        --url "postgresql://postgres@/postgres?host=/tmp/memvault-cpu-graph-XXXX/pg" [--filtered] [--graph-only]

The questions are stored memories' own vectors (500, by id), each searched in its own namespace
as its tenant, with the search's HNSW settings. Creates and drops a temporary table and functions of its own.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time
from collections.abc import Callable
from typing import Any

import psycopg

# The definitions are the migrations' own: the bench measures what shipped, not a copy of it.
SEARCH_FUNCTIONS = importlib.import_module("memvault.db.migrations.versions.0016_search_functions_tenant")
GRAPH_COPIES = importlib.import_module("memvault.db.migrations.versions.0036_graph_copies")

SAMPLE = """
CREATE TEMP TABLE bench_q AS
SELECT row_number() OVER (ORDER BY id) AS i, tenant_id, namespace_id, embedding, embedding_model
FROM (SELECT * FROM memories WHERE namespace_id IS NOT NULL AND embedding IS NOT NULL ORDER BY id LIMIT 500) s
"""
CALL = """
SELECT count(*) FROM bench_q q, {fn}(q.namespace_id, q.embedding, q.embedding_model, 50) WHERE q.i = %s
"""


def renamed(definition: str, name: str) -> str:
    return definition.replace("memvault_nearest_keyed", name, 1)


def before_0037(schema: str, path: str) -> str:
    """Migration 0036's memvault_nearest_keyed, as ``bench_nearest_0036``."""
    return renamed(GRAPH_COPIES._nearest(schema, path), "bench_nearest_0036")


def graph_only(schema: str, path: str) -> str:
    """0036's definition cut to its first branch (the graph's rows), as ``bench_nearest_graph_only``."""
    body = renamed(GRAPH_COPIES._nearest(schema, path), "bench_nearest_graph_only")
    start = body.index("(SELECT m.tenant_id") + 1
    first = body[start : body.index("UNION ALL")].rstrip().removesuffix(")")
    return body[: body.index("SELECT n.tenant_id")] + first + "\n        $$"


def filtered_statements() -> dict[str, tuple[str, dict[str, Any]]]:
    """The filtered search's nearest read (``dense_inner``) as it is and in 0036's shape (no exact
    read when the index part comes back short), over a namespace's live rows (a state filter)."""
    from pgvector.sqlalchemy import Vector
    from sqlalchemy import bindparam, select, union_all
    from sqlalchemy.dialects import postgresql

    from memvault.memories.models import Memory
    from memvault.retrieval.sql.candidates import dense_inner

    where = [
        Memory.tenant_id == bindparam("t", required=False),
        Memory.namespace_id == bindparam("ns", required=False),
        Memory.superseded_at.is_(None),
        Memory.state.in_(["tentative", "stable"]),
    ]
    vector, model = bindparam("v", type_=Vector, required=False), bindparam("model", required=False)
    dist = Memory.embedding.cosine_distance(vector)

    def nearest(*more: object) -> object:
        return (
            select(Memory.id, dist.label("dist"))
            .where(*where, *more, Memory.embedding_model == model, Memory.embedding.is_not(None))
            .order_by(dist)
            .limit(50)
        )

    before = union_all(nearest(Memory.in_graph), nearest(~Memory.in_graph)).subquery()  # type: ignore[arg-type]
    now = dense_inner(Memory, where, vector, model, 50)
    statements = {
        "as it is": select(now.c.id).order_by(now.c.dist),
        "0036 (no exact read when short)": select(before.c.id).order_by(before.c.dist).limit(50),
    }
    dialect = postgresql.psycopg.dialect()  # type: ignore[attr-defined]
    compiled = {
        label: q.compile(dialect=dialect, compile_kwargs={"render_postcompile": True})
        for label, q in statements.items()
    }
    return {label: (str(c), dict(c.params)) for label, c in compiled.items()}


def per_call_ms(conn: psycopg.Connection, call: Callable[[int, dict[str, Any]], None], seconds: float) -> float:
    """Milliseconds per ``call(i, question)`` (the ``i``-th sampled question: ``t``, ``ns``, ``v``,
    ``model``), each in a transaction as the question's tenant with the search's HNSW settings."""
    calls, i = 0, 0
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < deadline:
        i = i % 500 + 1
        with conn.transaction():
            question = conn.execute(
                "SELECT set_config('app.tenant_id', tenant_id::text, true)::uuid AS t, namespace_id AS ns, "
                "embedding::text AS v, embedding_model AS model FROM bench_q WHERE i = %s",
                (i,),
            ).fetchone()
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            conn.execute("SET LOCAL hnsw.ef_search = 100")
            call(i, dict(zip(("t", "ns", "v", "model"), question or (), strict=True)))
        calls += 1
    return (time.perf_counter() - start) * 1000 / calls


def function(conn: psycopg.Connection, fn: str) -> Callable[[int, dict[str, Any]], None]:
    return lambda i, _: conn.execute(CALL.format(fn=fn), (i,)).fetchone() and None


def statement(conn: psycopg.Connection, sql: str, constants: dict[str, Any]) -> Callable[[int, dict[str, Any]], None]:
    return lambda _, question: conn.execute(sql, {**constants, **question}).fetchall() and None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="owner connection URL of a memvault database")
    p.add_argument("--seconds", type=float, default=10.0, help="per variant and round")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--graph-only", action="store_true", help="also 0036's graph branch alone (before 0036)")
    p.add_argument("--filtered", action="store_true", help="also the filtered search's nearest read, both shapes")
    a = p.parse_args()
    variants = {"as it is": "memvault_nearest_keyed", "0036 (no exact read when short)": "bench_nearest_0036"}
    if a.graph_only:
        variants["0036's graph branch alone"] = "bench_nearest_graph_only"
    with psycopg.connect(a.url, autocommit=True) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()[0]  # type: ignore[index]
        vector = conn.execute("SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'")
        path = ", ".join(dict.fromkeys(["pg_catalog", schema, vector.fetchone()[0]]))  # type: ignore[index]
        conn.execute(SAMPLE)
        conn.execute(before_0037(schema, path))
        if a.graph_only:
            conn.execute(graph_only(schema, path))
        try:
            times: dict[str, list[float]] = {label: [] for label in variants}
            statements = filtered_statements() if a.filtered else {}
            times.update({f"filtered read, {label}": [] for label in statements})
            for r in range(a.rounds):
                order = list(variants.items())
                for label, fn in order if r % 2 == 0 else order[::-1]:
                    times[label].append(per_call_ms(conn, function(conn, fn), a.seconds))
                shapes = list(statements.items())
                for label, (sql, constants) in shapes if r % 2 == 0 else shapes[::-1]:
                    times[f"filtered read, {label}"].append(
                        per_call_ms(conn, statement(conn, sql, constants), a.seconds)
                    )
        finally:
            for fn in ("bench_nearest_0036", "bench_nearest_graph_only"):
                conn.execute(f"DROP FUNCTION IF EXISTS {fn}(uuid, vector, text, integer)")
    print("| variant | ms per call (median) | rounds |")
    print("|---|---|---|")
    for label, ms in times.items():
        print(f"| {label} | {statistics.median(ms):.2f} | {', '.join(f'{m:.2f}' for m in ms)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
