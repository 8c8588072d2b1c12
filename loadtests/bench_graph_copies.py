"""What reading the rows kept out of the HNSW graph costs the unfiltered search (migration 0036):
``memvault_nearest_keyed`` as it is (the graph's rows by the index, UNION ALL the slot's rows out of
the graph) against its first branch alone, on one database, alternating.

Point it at the owner URL of a seeded memvault database, e.g. one that
``bench_cpu_per_request.py --hold`` keeps up (its PostgreSQL is ``postgres`` on the socket folder
``<stack>/pg``):

    .venv/bin/python loadtests/bench_graph_copies.py \\
        --url "postgresql://postgres@/postgres?host=/tmp/memvault-cpu-graph-XXXX/pg" --seconds 10 --rounds 4

The questions are stored memories' own vectors (500, by id), each searched in its own namespace
as its tenant, with the search's HNSW settings. Creates and drops a table and a function of its own.
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg

SAMPLE = """
CREATE TEMP TABLE bench_q AS
SELECT row_number() OVER (ORDER BY id) AS i, tenant_id, namespace_id, embedding, embedding_model
FROM (SELECT * FROM memories WHERE namespace_id IS NOT NULL AND embedding IS NOT NULL ORDER BY id LIMIT 500) s
"""
CALL = """
SELECT count(*) FROM bench_q q, {fn}(q.namespace_id, q.embedding, q.embedding_model, 50) WHERE q.i = %s
"""


def graph_only(definition: str) -> str:
    """memvault_nearest_keyed's definition cut to its first branch (the graph's rows), renamed."""
    body = definition.replace("memvault_nearest_keyed", "bench_nearest_graph_only", 1)
    start = body.index("(SELECT m.tenant_id") + 1
    first = body[start : body.index("UNION ALL")].rstrip().removesuffix(")")
    return body[: body.index("SELECT n.tenant_id")] + first + "\n" + body[body.rindex("$function$") :]


def per_call_ms(conn: psycopg.Connection, fn: str, seconds: float) -> float:
    calls, i = 0, 0
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < deadline:
        i = i % 500 + 1
        with conn.transaction():
            conn.execute("SELECT set_config('app.tenant_id', tenant_id::text, true) FROM bench_q WHERE i = %s", (i,))
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            conn.execute("SET LOCAL hnsw.ef_search = 100")
            conn.execute(CALL.format(fn=fn), (i,)).fetchone()
        calls += 1
    return (time.perf_counter() - start) * 1000 / calls


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="owner connection URL of a memvault database")
    p.add_argument("--seconds", type=float, default=10.0, help="per variant and round")
    p.add_argument("--rounds", type=int, default=4)
    a = p.parse_args()
    with psycopg.connect(a.url, autocommit=True) as conn:
        definition = conn.execute("SELECT pg_get_functiondef('memvault_nearest_keyed'::regproc)").fetchone()
        assert definition is not None and "UNION ALL" in definition[0], "memvault_nearest_keyed before 0036"
        conn.execute(SAMPLE)
        conn.execute(graph_only(definition[0]))
        try:
            times: dict[str, list[float]] = {"as it is": [], "graph only": []}
            for r in range(a.rounds):
                order = [("as it is", "memvault_nearest_keyed"), ("graph only", "bench_nearest_graph_only")]
                for label, fn in order if r % 2 == 0 else order[::-1]:
                    times[label].append(per_call_ms(conn, fn, a.seconds))
        finally:
            conn.execute("DROP FUNCTION IF EXISTS bench_nearest_graph_only(uuid, vector, text, integer)")
    print("| variant | ms per call (median) | rounds |")
    print("|---|---|---|")
    for label, ms in times.items():
        print(f"| {label} | {statistics.median(ms):.2f} | {', '.join(f'{m:.2f}' for m in ms)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
