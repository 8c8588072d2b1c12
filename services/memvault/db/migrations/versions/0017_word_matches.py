"""memvault_word_matches_keyed: every live memory of the scope chain with one of the query's
picking words, by key, from the word index alone.

A search with filters reads the word channel's best matches first (memvault_word_best_keyed);
when its filters reject most of them, it reads every match instead. Through
memvault_word_best_keyed that meant two reads of each match's row: one to score it on every query
word, one to check it against the read conditions (which a SECURITY DEFINER function cannot
apply: they vary per request). A filter that keeps one memory in twenty read 2,000 rows twice.
This function returns the matches' keys from memory_terms only (an index range per word and
place in the scope chain); the search checks each row once and scores only those that pass, with
memvault_word_scores (0010, 0012): the same scores, so the same ranking (retrieval/hybrid.py).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import context, op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

CURRENT_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"
SYSTEM_TENANT = "'00000000-0000-0000-0000-000000000000'::uuid"
SIGNATURE = "memvault_word_matches_keyed(uuid, text[])"


def _app_role() -> str:
    role = context.config.get_main_option("memvault.app_role") or "memvault_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"unsafe role name {role!r}")
    return role


def upgrade() -> None:
    role = _app_role()
    schema = op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one()
    # The keys are memvault_word_best's (0014): the namespace and the tenant under the tenant set
    # in the transaction, the system under the system tenant. No row of another tenant is read.
    # ROWS: the order of magnitude of a filtered search's fallback, for the planner.
    op.execute(
        f"""
        CREATE FUNCTION memvault_word_matches_keyed(p_namespace uuid, p_picking text[])
        RETURNS TABLE (tenant_id uuid, id uuid) ROWS 1000
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, {schema}
        SET plan_cache_mode = force_custom_plan
        AS $$
            WITH keys (tenant_id, owner_key) AS (
                VALUES ({CURRENT_TENANT}, p_namespace),
                       ({CURRENT_TENANT}, {CURRENT_TENANT}),
                       ({SYSTEM_TENANT}, {SYSTEM_TENANT})
            )
            SELECT DISTINCT t.tenant_id, t.memory_id
            FROM unnest(p_picking) AS q(lexeme)
            CROSS JOIN keys
            CROSS JOIN LATERAL (
                SELECT t.tenant_id, t.memory_id FROM {schema}.memory_terms t
                WHERE t.tenant_id = keys.tenant_id AND t.owner_key = keys.owner_key AND t.lexeme = q.lexeme
                OFFSET 0
            ) t
        $$
        """
    )
    op.execute(f"REVOKE ALL ON FUNCTION {SIGNATURE} FROM PUBLIC")
    op.execute(f"GRANT EXECUTE ON FUNCTION {SIGNATURE} TO {role}")


def downgrade() -> None:
    op.execute(f"DROP FUNCTION IF EXISTS {SIGNATURE}")
