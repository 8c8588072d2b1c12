"""The dense channel's nearest rows in a function of their own, so the search statement can keep
one plan.

A search planned its whole statement for every call (about 7 ms of a 40 ms search at 100,000
memories today), because one part of it depends on the tenant's size: how to find the nearest
vectors. For a large namespace the HNSW index is fastest; for a namespace that is a small part
of a shared table, an exact scan of its rows is. Only a plan made with the actual tenant and
namespace can choose. memvault_nearest makes that choice on every call (a custom plan of one
small query); everything else in the statement reaches rows by key and can keep one plan per
connection, which an unfiltered search now does (retrieval/hybrid.py).

It runs as its caller: row-level security applies as it does inline. The scope chain and
lifecycle conditions are memvault_word_top's (0010); the caller applies the rest.

memvault_word_counts and memvault_word_match (0008) get force_custom_plan too, so a search
transaction that keeps generic plans never gives them one.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import context, op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

CURRENT_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"
SYSTEM_TENANT = "'00000000-0000-0000-0000-000000000000'::uuid"
SIGNATURE = "memvault_nearest(uuid, vector, text, integer)"
CUSTOM = ("memvault_word_counts(uuid, text[], integer)", "memvault_word_match(tsquery)")


def _app_role() -> str:
    role = context.config.get_main_option("memvault.app_role") or "memvault_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"unsafe role name {role!r}")
    return role


def upgrade() -> None:
    role = _app_role()
    bind = op.get_bind()
    schema = bind.exec_driver_sql("SELECT current_schema()").scalar_one()
    # pgvector's type and operators may live in a schema of their own (a managed database's).
    vector = bind.exec_driver_sql(
        "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'"
    ).scalar_one()
    path = ", ".join(dict.fromkeys(["pg_catalog", schema, vector]))
    # The live, current rows of the scope chain with a vector of p_model, nearest first.
    op.execute(
        f"""
        CREATE FUNCTION memvault_nearest(p_namespace uuid, p_vector vector, p_model text, p_limit integer)
        RETURNS TABLE (id uuid, dist float8)
        LANGUAGE sql STABLE
        SET search_path = {path}
        SET plan_cache_mode = force_custom_plan
        AS $$
            SELECT m.id, m.embedding <=> p_vector AS dist
            FROM {schema}.memories m
            WHERE ((m.tenant_id = {CURRENT_TENANT}
                    AND (m.namespace_id = p_namespace OR (m.namespace_id IS NULL AND m.scope = 'tenant')))
                   OR (m.tenant_id = {SYSTEM_TENANT} AND m.scope = 'system'))
              AND m.superseded_at IS NULL AND m.state IN ('tentative', 'stable')
              AND m.embedding_model = p_model AND m.embedding IS NOT NULL
            ORDER BY dist
            LIMIT p_limit
        $$;
        """
    )
    op.execute(f"REVOKE ALL ON FUNCTION {SIGNATURE} FROM PUBLIC")
    op.execute(f"GRANT EXECUTE ON FUNCTION {SIGNATURE} TO {role}")
    for fn in CUSTOM:
        op.execute(f"ALTER FUNCTION {fn} SET plan_cache_mode = force_custom_plan")


def downgrade() -> None:
    for fn in CUSTOM:
        op.execute(f"ALTER FUNCTION {fn} RESET plan_cache_mode")
    op.execute(f"DROP FUNCTION IF EXISTS {SIGNATURE}")
