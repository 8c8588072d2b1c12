"""At most a few rows of one text in the HNSW graph: copies beyond them stay out of it and are
searched exactly.

The HNSW index over ``memories`` is one graph of every tenant's rows (one per shard on Citus).
pgvector's neighbour selection keeps a candidate only if it is nearer to the element than to every
neighbour already kept; exact copies are at distance 0 from each other, so once a vector has more
graph elements than a neighbour list holds (2 x m = 32 at level 0; pgvector packs up to 10 heap
rows of one vector into an element, so a few hundred rows) their lists hold only each other, and a
memory stored near them gets links out but none in. A text stored a thousand times, by one tenant
or by many, then blinds every tenant's dense channel near it: measured (test
tests/retrieval/test_graph_copies.py), another tenant's 1,000 copies left a 4,000-memory tenant's
search with **no** dense candidate at all for a query near that text, its own exact match included
(the scan entered the copies and found no way out). The dedup probe had met the same islands
(issue 25, docs/benchmarks-journal.md).

``in_graph``: a row whose text (``content_hash``) and model already have ``GRAPH_COPIES`` rows with
a vector in the graph is kept out of it (the HNSW index is partial, ``WHERE in_graph``). The
trigger decides on insert and when a row's text, model or vector changes, counting in the table it
fires on: on Citus that is the shard, whose own graph is the one that matters. Concurrent writers
may each let one copy past the count: a few over the cap, never hundreds.

Every nearest-neighbour read takes the graph's rows by the index and the slot's rows outside it
exactly (``memvault_nearest_keyed`` here; the filtered search and the dedup probe in Python): a
slot holds few such rows (its own copies past the cap), found through ``ix_memories_off_graph``.
A release before this one keeps working: its nearest function is this one, and its filtered
dense reads, which do not name ``in_graph``, read their slot exactly instead of by the index.

Revision ID: 0036
Revises: 0035
Create Date: 2026-12-06
"""

from __future__ import annotations

import importlib
from typing import Any

from alembic import op

revision = "0036"
down_revision = "0035"
branch_labels = None
depends_on = None

# Copies of one text (and model) in one graph; the next go around it. Well under a level-0
# neighbour list (32), so copies never fill one.
GRAPH_COPIES = 8
HNSW = "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
NEAREST = "memvault_nearest_keyed"


def _revision(module: str) -> Any:
    return importlib.import_module(f"memvault.db.migrations.versions.{module}")


# 0016 made memvault_nearest_keyed (its scope chain, its parameters); 0035 rewrites a function
# into the version that reads the tenant's shard by name, on Citus.
SEARCH_FUNCTIONS = _revision("0016_search_functions_tenant")
CITUS = _revision("0035_citus_shard_functions")


def _create(schema: str, path: str, definition: str | None) -> str:
    """memvault_nearest_keyed as 0016 declared it (parameters, result, row estimate), with
    ``definition`` (attributes and body); 0016's own when None."""
    parameters, columns, made, rows = SEARCH_FUNCTIONS._functions(schema, path)[SEARCH_FUNCTIONS.NEAREST]
    header = f"CREATE OR REPLACE FUNCTION {NEAREST}({parameters}) RETURNS TABLE ({columns}) ROWS {rows}"
    return f"{header} {definition or made}"


def _nearest(schema: str, path: str) -> str:
    """memvault_nearest_keyed reading the graph's rows by the index and the rest exactly."""
    one = f"""SELECT m.tenant_id, m.id, m.embedding <=> p_vector AS dist FROM {schema}.memories m
              WHERE {SEARCH_FUNCTIONS.SCOPE_CHAIN}
              AND {SEARCH_FUNCTIONS.LIVE}
              AND m.embedding_model = p_model AND m.embedding IS NOT NULL"""
    return _create(
        schema,
        path,
        f"""LANGUAGE sql STABLE
        SET search_path = {path}
        SET plan_cache_mode = force_custom_plan
        AS $$
            SELECT n.tenant_id, n.id, n.dist FROM (
                ({one} AND m.in_graph ORDER BY dist LIMIT p_limit)
                UNION ALL
                ({one} AND NOT m.in_graph ORDER BY dist LIMIT p_limit)
            ) n
            ORDER BY n.dist
            LIMIT p_limit
        $$""",
    )


def upgrade() -> None:
    schema, path = SEARCH_FUNCTIONS._schema_and_path()
    citus = CITUS._citus()
    if citus:
        op.execute("SET LOCAL citus.multi_shard_modify_mode = 'sequential'")
        op.execute("SET LOCAL citus.enable_unsafe_triggers = on")
    # A constant default: no rewrite of the table.
    op.execute("ALTER TABLE memories ADD COLUMN in_graph boolean NOT NULL DEFAULT true")
    # The copies already stored past the cap, oldest kept; on Citus counted per tenant (a
    # statement Citus can push to each shard), which keeps at most as many as per shard.
    per = "m.tenant_id, " if citus else ""
    op.execute(
        f"""
        UPDATE memories m SET in_graph = false
        FROM (
            SELECT m.tenant_id, m.id, row_number() OVER (
                PARTITION BY {per}m.content_hash, m.embedding_model ORDER BY m.created_at, m.id) AS n
            FROM memories m WHERE m.embedding IS NOT NULL
        ) c
        WHERE m.tenant_id = c.tenant_id AND m.id = c.id AND c.n > {GRAPH_COPIES}
        """
    )
    op.execute("DROP INDEX ix_memories_embedding")
    op.execute(f"CREATE INDEX ix_memories_embedding ON memories {HNSW} WHERE in_graph")
    op.execute(
        "CREATE INDEX ix_memories_graph_copies ON memories (content_hash, embedding_model) "
        "WHERE in_graph AND embedding IS NOT NULL"
    )
    op.execute("CREATE INDEX ix_memories_off_graph ON memories (tenant_id, namespace_id) WHERE NOT in_graph")
    # SECURITY DEFINER: the count is of every tenant's rows in the graph, which the caller's
    # row-level security would hide. The table is the one the trigger fires on (a shard on Citus).
    op.execute(
        f"""
        CREATE FUNCTION memvault_graph_admit() RETURNS trigger
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {schema} AS $$
        DECLARE copies integer;
        BEGIN
            IF NEW.embedding IS NULL THEN
                NEW.in_graph := true;
                RETURN NEW;
            END IF;
            IF TG_OP = 'UPDATE' AND OLD.in_graph AND OLD.embedding IS NOT NULL
               AND OLD.content_hash = NEW.content_hash AND OLD.embedding_model IS NOT DISTINCT FROM NEW.embedding_model
            THEN
                RETURN NEW;  -- already one of the copies in the graph
            END IF;
            EXECUTE format(
                'SELECT count(*) FROM (SELECT 1 FROM %I.%I WHERE content_hash = $1 AND embedding_model = $2'
                ' AND in_graph AND embedding IS NOT NULL AND id <> $3 LIMIT $4) c',
                TG_TABLE_SCHEMA, TG_TABLE_NAME)
            INTO copies USING NEW.content_hash, NEW.embedding_model, NEW.id, {GRAPH_COPIES};
            NEW.in_graph := copies < {GRAPH_COPIES};
            RETURN NEW;
        END $$
        """
    )
    op.execute("REVOKE ALL ON FUNCTION memvault_graph_admit() FROM PUBLIC")
    op.execute(
        """
        CREATE TRIGGER memories_graph_admit BEFORE INSERT OR UPDATE OF embedding, embedding_model, content_hash
        ON memories FOR EACH ROW EXECUTE FUNCTION memvault_graph_admit()
        """
    )
    op.execute(_nearest(schema, path))
    if citus:
        CITUS.shard_local(NEAREST)
    # Statistics of the new column at once: without them the planner takes half of every slot to
    # be out of the graph and may read a large slot exactly instead of by the index.
    op.execute("ANALYZE memories")


def downgrade() -> None:
    if CITUS._citus():
        raise RuntimeError("migration 0036 cannot be undone on Citus; restore the backup taken before 0032")
    schema, path = SEARCH_FUNCTIONS._schema_and_path()
    op.execute(_create(schema, path, None))  # 0016's definition back, as it made it
    op.execute("DROP TRIGGER memories_graph_admit ON memories")
    op.execute("DROP FUNCTION memvault_graph_admit()")
    op.execute("DROP INDEX ix_memories_off_graph")
    op.execute("DROP INDEX ix_memories_graph_copies")
    op.execute("DROP INDEX ix_memories_embedding")
    op.execute(f"CREATE INDEX ix_memories_embedding ON memories {HNSW}")
    op.execute("ALTER TABLE memories DROP COLUMN in_graph")
