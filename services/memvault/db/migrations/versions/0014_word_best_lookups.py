"""memvault_word_best reads memory_terms and memories one key at a time, whatever the statistics.

Until autovacuum has analyzed a table, PostgreSQL plans without statistics for it. On a new
database right after a first import (three LoCoMo conversations, 1,451 memories), 0013's
memvault_word_best joined its word matches to memories through an index on the tenant
(ix_memories_model) and read every row of the tenant once per match: 150-270 ms a call, where the
same call takes 1.5-2.5 ms once the tables are analyzed (docs/operations.md, "Right after a bulk
import").

Both lookups are now LATERAL subqueries behind OFFSET 0, which PostgreSQL plans on their own with
the outer row's key as parameters: a word's range of memory_terms by its primary key, and a
match's row of memories by its primary key (tenant and id, both carried from memory_terms; the
scope and liveness checks stay outside the lookup, where no partial index can take them). The
same call then took 1.3 ms without statistics and 1.1-2.0 ms with them, and returns the same rows
with the same scores (tests/db/test_word_index.py).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

CURRENT_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"
SYSTEM_TENANT = "'00000000-0000-0000-0000-000000000000'::uuid"
K1, B = 1.2, 0.75
UNROLLED = 16
# memvault_word_top's score as migration 0012 left it, so both functions give a row one score.
IDF_SUM = (
    f"(CASE WHEN cardinality(p_lexemes) <= {UNROLLED} THEN "
    + " + ".join(f"CASE WHEN m.tsv @@ p_lexemes[{i}] THEN p_idf[{i}] ELSE 0 END" for i in range(1, UNROLLED + 1))
    + " ELSE (SELECT coalesce(sum(t.idf), 0) FROM unnest(p_lexemes, p_idf) AS t(lexeme, idf)"
    " WHERE m.tsv @@ t.lexeme) END)"
)
SCOPE_CHAIN = f"""((m.tenant_id = {CURRENT_TENANT}
                    AND (m.namespace_id = p_namespace OR (m.namespace_id IS NULL AND m.scope = 'tenant')))
                   OR (m.tenant_id = {SYSTEM_TENANT} AND m.scope = 'system'))"""


def _length(doc_len: str) -> str:
    return f"{K1 + 1} / (1 + {K1} * ({1 - B} + {B} * {doc_len} / greatest(p_avg_len, 1)))"


def word_best(schema: str, *, lookups: bool) -> str:
    """memvault_word_best's CREATE statement: with ``lookups`` as this migration makes it, else
    as 0013 made it (plain joins)."""
    # With the lookups, a match carries its tenant (one of the keys' two): memories' primary key,
    # both columns given by equality, is then the one index that can find the row.
    found = "t.tenant_id, t.memory_id" if lookups else "t.memory_id"
    if lookups:
        terms = f"""CROSS JOIN LATERAL (
                    SELECT t.tenant_id, t.memory_id, t.doc_len FROM {schema}.memory_terms t
                    WHERE t.tenant_id = keys.tenant_id AND t.owner_key = keys.owner_key AND t.lexeme = q.lexeme
                    OFFSET 0
                ) t"""
        # The row by its key alone: its scope and liveness are checked outside the lookup, where
        # no partial index on memories can take them and turn it into a scan of the tenant.
        rows = f"""SELECT m.id, m.score
            FROM found
            CROSS JOIN LATERAL (
                SELECT m.id, m.tenant_id, m.namespace_id, m.scope, m.superseded_at, m.state,
                       {IDF_SUM} * {_length("length(m.tsv)")} AS score
                FROM {schema}.memories m
                WHERE m.tenant_id = found.tenant_id AND m.id = found.memory_id
                OFFSET 0
            ) m
            WHERE {SCOPE_CHAIN}
              AND m.superseded_at IS NULL AND m.state IN ('tentative', 'stable')
            ORDER BY m.score DESC, m.id"""
    else:
        terms = f"""JOIN {schema}.memory_terms t
                  ON t.tenant_id = keys.tenant_id AND t.owner_key = keys.owner_key AND t.lexeme = q.lexeme"""
        rows = f"""SELECT m.id, {IDF_SUM} * {_length("length(m.tsv)")} AS score
            FROM found
            JOIN {schema}.memories m
              ON m.id = found.memory_id AND m.tenant_id IN ({CURRENT_TENANT}, {SYSTEM_TENANT})
            WHERE {SCOPE_CHAIN}
              AND m.superseded_at IS NULL AND m.state IN ('tentative', 'stable')
            ORDER BY score DESC, m.id"""
    return f"""
        CREATE OR REPLACE FUNCTION memvault_word_best(
            p_namespace uuid, p_picking text[], p_words text[], p_lexemes tsquery[], p_idf float8[],
            p_avg_len float8, p_limit integer
        ) RETURNS TABLE (id uuid, score float8)
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, {schema}
        SET plan_cache_mode = force_custom_plan
        AS $$
            WITH keys (tenant_id, owner_key) AS (
                VALUES ({CURRENT_TENANT}, p_namespace),
                       ({CURRENT_TENANT}, {CURRENT_TENANT}),
                       ({SYSTEM_TENANT}, {SYSTEM_TENANT})
            ),
            found AS (
                SELECT {found}, sum(q.idf) * {_length("min(t.doc_len)")} AS picked
                FROM unnest(p_words, p_idf) AS q(lexeme, idf)
                CROSS JOIN keys
                {terms}
                WHERE q.lexeme = ANY (p_picking)
                GROUP BY {found}
                ORDER BY picked DESC, t.memory_id
                LIMIT 4 * p_limit
            )
            {rows}
            LIMIT p_limit
        $$;
        """


def upgrade() -> None:
    schema = op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one()
    op.execute(word_best(schema, lookups=True))


def downgrade() -> None:
    schema = op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one()
    op.execute(word_best(schema, lookups=False))
