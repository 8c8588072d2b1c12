"""BM25 of a row as one expression instead of a subquery per row.

memvault_word_top and memvault_word_scores (0010) summed the idf of the query words a memory
contains with a subquery over the query's words, run once for every row scored: a few thousand
rows for a question with common words. A query of up to 16 words now sums one CASE per word (a
word past the query's last is NULL and adds nothing); a longer one keeps the subquery. The
scores are the same (a word a row lacks adds exactly 0). On the 100,000-memory latency build,
for 16 LoCoMo questions, memvault_word_top took 20-30% less time (docs/benchmarks.md).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

CURRENT_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"
SYSTEM_TENANT = "'00000000-0000-0000-0000-000000000000'::uuid"
K1, B = 1.2, 0.75
UNROLLED = 16
SUBQUERY = "(SELECT coalesce(sum(t.idf), 0) FROM unnest(p_lexemes, p_idf) AS t(lexeme, idf) WHERE m.tsv @@ t.lexeme)"
CASES = " + ".join(f"CASE WHEN m.tsv @@ p_lexemes[{i}] THEN p_idf[{i}] ELSE 0 END" for i in range(1, UNROLLED + 1))
LENGTH = f"{K1 + 1} / (1 + {K1} * ({1 - B} + {B} * length(m.tsv) / greatest(p_avg_len, 1)))"


def _functions(schema: str, idf_sum: str) -> list[str]:
    """Both functions with ``idf_sum`` as the sum of the idf of the query words a row contains;
    the rest as migration 0010 wrote them (CREATE OR REPLACE keeps their owner and grants)."""
    score = f"{idf_sum} * {LENGTH}"
    header = f"""LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, {schema}
        SET plan_cache_mode = force_custom_plan"""
    return [
        f"""
        CREATE OR REPLACE FUNCTION memvault_word_top(
            p_namespace uuid, p_query tsquery, p_lexemes tsquery[], p_idf float8[], p_avg_len float8,
            p_live boolean, p_limit integer
        ) RETURNS TABLE (id uuid, score float8)
        {header}
        AS $$
            SELECT m.id, {score} AS score
            FROM {schema}.memories m
            WHERE m.tsv @@ p_query
              AND ((m.tenant_id = {CURRENT_TENANT}
                    AND (m.namespace_id = p_namespace OR (m.namespace_id IS NULL AND m.scope = 'tenant')))
                   OR (m.tenant_id = {SYSTEM_TENANT} AND m.scope = 'system'))
              AND (NOT p_live OR (m.superseded_at IS NULL AND m.state IN ('tentative', 'stable')))
            ORDER BY score DESC, m.id
            LIMIT p_limit
        $$;
        """,
        f"""
        CREATE OR REPLACE FUNCTION memvault_word_scores(
            p_ids uuid[], p_lexemes tsquery[], p_idf float8[], p_avg_len float8
        ) RETURNS TABLE (id uuid, score float8)
        {header}
        AS $$
            SELECT m.id, {score} AS score
            FROM {schema}.memories m
            WHERE m.tenant_id IN ({CURRENT_TENANT}, {SYSTEM_TENANT}) AND m.id = ANY (p_ids)
        $$;
        """,
    ]


def upgrade() -> None:
    schema = op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one()
    unrolled = f"(CASE WHEN cardinality(p_lexemes) <= {UNROLLED} THEN {CASES} ELSE {SUBQUERY} END)"
    for statement in _functions(schema, unrolled):
        op.execute(statement)


def downgrade() -> None:
    schema = op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one()
    for statement in _functions(schema, SUBQUERY):
        op.execute(statement)
