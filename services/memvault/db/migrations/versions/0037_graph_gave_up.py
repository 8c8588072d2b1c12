"""The nearest rows exactly when the HNSW scan gives up short.

``memvault_nearest_keyed`` reads the graph's rows by the HNSW index with pgvector's iterative
scan: the scan walks outwards from the query until enough rows pass the tenant's conditions, or
until ``hnsw.max_scan_tuples`` (20,000) index tuples have gone by. A tenant whose rows lie beyond
that many other tenants' rows nearer the query then got fewer candidates than asked, and when the
walk had also missed the tenant's one close row (an approximate search may) it got **none**: seen
in CI (tests/retrieval/test_graph_copies.py in a full suite's shared database), a 4,000-memory
tenant's search for a question its own memory answered word for word had no dense candidate, the
symptom migration 0036 removed for copies. A channel that silently returns nothing while the
tenant holds the answer is the worst failure a memory service has.

Now, when the index part returns fewer rows than asked, the graph's rows of the slot are read
exactly instead (``memvault_nearest_exact``, ordered by an expression the index cannot serve). It
runs only then (a one-time filter on the index part's count), and as a function of its own it is
not even planned otherwise; the exact read costs what a small tenant's plan pays every time (the
slot's rows by its index on tenant and namespace).

Revision ID: 0037
Revises: 0036
Create Date: 2026-12-06
"""

from __future__ import annotations

import importlib
from typing import Any

from alembic import op

revision = "0037"
down_revision = "0036"
branch_labels = None
depends_on = None


def _revision(module: str) -> Any:
    return importlib.import_module(f"memvault.db.migrations.versions.{module}")


SEARCH_FUNCTIONS = _revision("0016_search_functions_tenant")
CITUS = _revision("0035_citus_shard_functions")
GRAPH_COPIES = _revision("0036_graph_copies")


EXACT = "memvault_nearest_exact"


def _one(schema: str) -> str:
    return f"""SELECT m.tenant_id, m.id, m.embedding <=> p_vector AS dist FROM {schema}.memories m
              WHERE {SEARCH_FUNCTIONS.SCOPE_CHAIN}
              AND {SEARCH_FUNCTIONS.LIVE}
              AND m.embedding_model = p_model AND m.embedding IS NOT NULL"""


def _exact(schema: str, path: str) -> str:
    """The slot's graph rows nearest first, read exactly. A function of its own so that a call
    which does not need it does not plan it either (its SET clause keeps it from being inlined)."""
    parameters, columns, _, rows = SEARCH_FUNCTIONS._functions(schema, path)[SEARCH_FUNCTIONS.NEAREST]
    return f"""CREATE OR REPLACE FUNCTION {EXACT}({parameters}) RETURNS TABLE ({columns}) ROWS {rows}
        LANGUAGE sql STABLE
        SET search_path = {path}
        SET plan_cache_mode = force_custom_plan
        AS $$
            -- "+ 0": an order the HNSW index cannot serve.
            {_one(schema)} AND m.in_graph ORDER BY (m.embedding <=> p_vector) + 0 LIMIT p_limit
        $$"""


def _nearest(schema: str, path: str) -> str:
    one = _one(schema)
    return GRAPH_COPIES._create(
        schema,
        path,
        f"""LANGUAGE sql STABLE
        SET search_path = {path}
        SET plan_cache_mode = force_custom_plan
        AS $$
            WITH graph AS MATERIALIZED ({one} AND m.in_graph ORDER BY dist LIMIT p_limit),
            short AS (SELECT count(*) < p_limit AS gave_up FROM graph)
            SELECT n.tenant_id, n.id, n.dist FROM (
                (SELECT g.tenant_id, g.id, g.dist FROM graph g WHERE NOT (SELECT gave_up FROM short))
                UNION ALL
                (SELECT e.tenant_id, e.id, e.dist FROM {EXACT}(p_namespace, p_vector, p_model, p_limit) e
                 WHERE (SELECT gave_up FROM short))
                UNION ALL
                ({one} AND NOT m.in_graph ORDER BY dist LIMIT p_limit)
            ) n
            ORDER BY n.dist
            LIMIT p_limit
        $$""",
    )


def upgrade() -> None:
    schema, path = SEARCH_FUNCTIONS._schema_and_path()
    op.execute(_exact(schema, path))
    op.execute(f"REVOKE ALL ON FUNCTION {EXACT}(uuid, vector, text, integer) FROM PUBLIC")
    # Called by memvault_nearest_keyed, which runs as its caller (row-level security applies).
    op.execute(f"GRANT EXECUTE ON FUNCTION {EXACT}(uuid, vector, text, integer) TO {SEARCH_FUNCTIONS._app_role()}")
    op.execute(_nearest(schema, path))
    if CITUS._citus():
        CITUS.shard_local(EXACT)
        CITUS.shard_local(GRAPH_COPIES.NEAREST)


def downgrade() -> None:
    op.execute(GRAPH_COPIES._nearest(*SEARCH_FUNCTIONS._schema_and_path()))
    if CITUS._citus():
        CITUS.shard_local(GRAPH_COPIES.NEAREST)
    op.execute(f"DROP FUNCTION {EXACT}(uuid, vector, text, integer)")
