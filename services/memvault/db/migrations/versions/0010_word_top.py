"""BM25 inside the database: the lexical channel's best matches, and the word scores of any rows.

Until now the lexical channel took the ids of every memory sharing a rare word with the query
(memvault_word_match, 0008), read each of those rows again through row-level security by primary
key, and scored it there: about 4 µs a row, 5 to 10 ms for a query whose words match 1,000 to
3,000 of 100,000 memories. memvault_word_top scores the matched rows where the full-text index
finds them, as the table owner, and returns only the best: the caller then reads that handful
through RLS. memvault_word_scores scores given rows of the tenant (the candidates that meaning or
a session neighbour brought in), so both use this one formula.

BM25 with every query word counted once per memory (memories are short; repeats rare): the sum
of the idf of the query words a memory contains, times (k1 + 1) / (1 + k1 (1 - b + b len/avg)),
with k1 = 1.2 and b = 0.75. The caller computes the idf of each word from its counts
(retrieval/lexical.py).

Both run with force_custom_plan: PostgreSQL 18 caches the plans of SQL functions, and a generic
plan cannot see how few rows a rare word matches. memvault_has_other_model (0008) gets the same
setting, which the search transaction already sets (a generic plan of it scanned the namespace).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import context, op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

CURRENT_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"
SYSTEM_TENANT = "'00000000-0000-0000-0000-000000000000'::uuid"
K1, B = 1.2, 0.75
BM25 = f"""(SELECT coalesce(sum(t.idf), 0) FROM unnest(p_lexemes, p_idf) AS t(lexeme, idf) WHERE m.tsv @@ t.lexeme)
           * {K1 + 1} / (1 + {K1} * ({1 - B} + {B} * length(m.tsv) / greatest(p_avg_len, 1)))"""


def _app_role() -> str:
    role = context.config.get_main_option("memvault.app_role") or "memvault_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"unsafe role name {role!r}")
    return role


def _definer(schema: str, signature: str, returns: str, body: str) -> str:
    """A SQL function that runs as the table owner, with a custom plan for every call."""
    return f"""
        CREATE FUNCTION {signature} RETURNS {returns}
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, {schema}
        SET plan_cache_mode = force_custom_plan
        AS $${body}$$;
        """


def upgrade() -> None:
    role = _app_role()
    schema = op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one()
    # The scope chain's rows that can match at all (the namespace's, the tenant's shared ones, the
    # system's), best first; with p_live only the current, live ones. The caller applies every
    # other read condition (filters, owners, narrowest scope wins) to what comes back, and asks
    # for every match (p_limit NULL) when those conditions left too few of the best.
    op.execute(
        _definer(
            schema,
            """memvault_word_top(
            p_namespace uuid, p_query tsquery, p_lexemes tsquery[], p_idf float8[], p_avg_len float8,
            p_live boolean, p_limit integer
        )""",
            "TABLE (id uuid, score float8)",
            f"""
            SELECT m.id, {BM25} AS score
            FROM {schema}.memories m
            WHERE m.tsv @@ p_query
              AND ((m.tenant_id = {CURRENT_TENANT}
                    AND (m.namespace_id = p_namespace OR (m.namespace_id IS NULL AND m.scope = 'tenant')))
                   OR (m.tenant_id = {SYSTEM_TENANT} AND m.scope = 'system'))
              AND (NOT p_live OR (m.superseded_at IS NULL AND m.state IN ('tentative', 'stable')))
            ORDER BY score DESC, m.id
            LIMIT p_limit
        """,
        )
    )
    op.execute(
        _definer(
            schema,
            "memvault_word_scores(p_ids uuid[], p_lexemes tsquery[], p_idf float8[], p_avg_len float8)",
            "TABLE (id uuid, score float8)",
            f"""
            SELECT m.id, {BM25} AS score
            FROM {schema}.memories m
            WHERE m.tenant_id IN ({CURRENT_TENANT}, {SYSTEM_TENANT}) AND m.id = ANY (p_ids)
        """,
        )
    )
    for fn in (
        "memvault_word_top(uuid, tsquery, tsquery[], float8[], float8, boolean, integer)",
        "memvault_word_scores(uuid[], tsquery[], float8[], float8)",
    ):
        op.execute(f"REVOKE ALL ON FUNCTION {fn} FROM PUBLIC")
        op.execute(f"GRANT EXECUTE ON FUNCTION {fn} TO {role}")
    op.execute("ALTER FUNCTION memvault_has_other_model(uuid, text) SET plan_cache_mode = force_custom_plan")


def downgrade() -> None:
    op.execute("ALTER FUNCTION memvault_has_other_model(uuid, text) RESET plan_cache_mode")
    op.execute("DROP FUNCTION IF EXISTS memvault_word_scores(uuid[], tsquery[], float8[], float8)")
    op.execute(
        "DROP FUNCTION IF EXISTS memvault_word_top(uuid, tsquery, tsquery[], float8[], float8, boolean, integer)"
    )
