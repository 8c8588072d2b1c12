"""Full-text matching (and the embedding-model probe) that can use their indexes under
row-level security.

PostgreSQL applies an RLS policy before any condition whose operator is not LEAKPROOF, and the
full-text match (`tsv @@ query`) is not: under the app role a word search therefore reads every
row of the namespace through its b-tree and rechecks its words (80 ms at 100,000 memories).
These two functions run the match as the table owner, on the GIN index, and return only ids
(or counts) of the tenant set in the transaction (`app.tenant_id`) and of the shared system
tenant; the caller then reads those rows through RLS as before. Text comparison (`<`, `>`) is
not LEAKPROOF either, so the same holds for the probe every search makes for memories embedded
by another model (92 ms at 100,000 memories under RLS, a few index probes here).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import context, op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

CURRENT_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"
SYSTEM_TENANT = "'00000000-0000-0000-0000-000000000000'::uuid"


def _app_role() -> str:
    role = context.config.get_main_option("memvault.app_role") or "memvault_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"unsafe role name {role!r}")
    return role


def upgrade() -> None:
    role = _app_role()
    schema = op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one()
    op.execute(
        f"""
        CREATE FUNCTION memvault_word_match(p_query tsquery) RETURNS TABLE (id uuid)
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, {schema}
        AS $$
            SELECT m.id FROM {schema}.memories m
            WHERE m.tsv @@ p_query AND m.tenant_id IN ({CURRENT_TENANT}, {SYSTEM_TENANT})
        $$;
        """
    )
    # Counted up to p_cap each; seq scans off so that the LIMIT never tempts the planner into
    # reading the table from the start until it meets p_cap matches of a rare word.
    op.execute(
        f"""
        CREATE FUNCTION memvault_word_counts(p_namespace uuid, p_lexemes text[], p_cap integer)
        RETURNS TABLE (lexeme text, df integer)
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, {schema}
        SET enable_seqscan = off
        AS $$
            SELECT l, (SELECT count(*) FROM (
                         SELECT 1 FROM {schema}.memories m
                         WHERE m.tsv @@ quote_literal(l)::tsquery
                           AND m.tenant_id = {CURRENT_TENANT} AND m.namespace_id = p_namespace
                           AND m.superseded_at IS NULL
                         LIMIT p_cap) hits)::integer
            FROM unnest(p_lexemes) l
        $$;
        """
    )
    op.execute(
        f"""
        CREATE FUNCTION memvault_has_other_model(p_namespace uuid, p_model text) RETURNS boolean
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, {schema}
        AS $$
            SELECT EXISTS (SELECT 1 FROM {schema}.memories m
                           WHERE m.tenant_id = {CURRENT_TENANT} AND m.namespace_id = p_namespace
                             AND m.superseded_at IS NULL AND m.state <> 'archived' AND m.embedding_model < p_model)
                OR EXISTS (SELECT 1 FROM {schema}.memories m
                           WHERE m.tenant_id = {CURRENT_TENANT} AND m.namespace_id = p_namespace
                             AND m.superseded_at IS NULL AND m.state <> 'archived' AND m.embedding_model > p_model)
                OR EXISTS (SELECT 1 FROM {schema}.memories m
                           WHERE m.tenant_id = {CURRENT_TENANT} AND m.namespace_id = p_namespace
                             AND m.superseded_at IS NULL AND m.state <> 'archived' AND m.embedding_model IS NULL)
        $$;
        """
    )
    for fn in (
        "memvault_word_match(tsquery)",
        "memvault_word_counts(uuid, text[], integer)",
        "memvault_has_other_model(uuid, text)",
    ):
        op.execute(f"REVOKE ALL ON FUNCTION {fn} FROM PUBLIC")
        op.execute(f"GRANT EXECUTE ON FUNCTION {fn} TO {role}")


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS memvault_has_other_model(uuid, text)")
    op.execute("DROP FUNCTION IF EXISTS memvault_word_counts(uuid, text[], integer)")
    op.execute("DROP FUNCTION IF EXISTS memvault_word_match(tsquery)")
