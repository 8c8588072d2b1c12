"""Inferred conversations (issue 30): events stored without a session id, by owner and session
order.

An event without a ``session_id`` has as neighbours (the search's context channel, the
``neighbours`` option) the events of the same owner (scope, user, agent), also without one, just
before and after it in session order within a gap (retrieval/sql/inferred.py). This index makes
each such lookup one probe, as ``ix_memories_session`` does for memories with a session id; the
two cover disjoint rows, and other kinds of memory without a session are in neither. The owner's
NULLs are spelled '' so that equality finds them.

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import context, op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None


CURRENT_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"
ARGS = "(uuid, text, text, text, timestamptz, bigint, double precision, integer)"


def _app_role() -> str:
    role = context.config.get_main_option("memvault.app_role") or "memvault_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"unsafe role name {role!r}")
    return role


def upgrade() -> None:
    # Before the index: on Citus a function command cannot follow, in one transaction, the index's
    # parallel creation on the distributed table's shards.
    # The probe along the index below, as the table owner. Under the app role's row-level security a
    # condition that is not LEAKPROOF runs after the policy, and COALESCE counts as such: the
    # owner's `coalesce(user_id, '')` could not be an index condition there, so each probe read
    # the namespace's rows by another index (~400 rows a probe, the text-only search's SQL twice a
    # session search's). Ids only, of the tenant set in the transaction; the caller reads them
    # through RLS and its own conditions, and takes the first that passes.
    role = _app_role()
    schema = op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one()
    for name, cmp, within, step, order in (
        ("memvault_alone_before", "<", ">=", "-", "DESC"),
        ("memvault_alone_after", ">", "<=", "+", "ASC"),
    ):
        op.execute(
            f"""
            CREATE FUNCTION {name}(
                p_namespace uuid, p_scope text, p_user text, p_agent text, p_ord timestamptz, p_seq bigint,
                p_gap_s double precision, p_k integer
            ) RETURNS TABLE (tenant_id uuid, id uuid)
            LANGUAGE sql STABLE SECURITY DEFINER
            SET search_path = pg_catalog, {schema}
            AS $$
                SELECT m.tenant_id, m.id FROM {schema}.memories m
                WHERE m.tenant_id = {CURRENT_TENANT} AND m.namespace_id = p_namespace
                  AND m.session_id IS NULL AND m.namespace_id IS NOT NULL AND m.type = 'event'
                  AND m.scope = p_scope AND coalesce(m.user_id, '') = p_user AND coalesce(m.agent_id, '') = p_agent
                  AND (coalesce(m.valid_from, m.created_at), m.seq) {cmp} (p_ord, p_seq)
                  AND coalesce(m.valid_from, m.created_at) {within} p_ord {step} make_interval(secs => p_gap_s)
                ORDER BY m.scope {order}, coalesce(m.user_id, '') {order}, coalesce(m.agent_id, '') {order},
                         coalesce(m.valid_from, m.created_at) {order}, m.seq {order}
                LIMIT p_k
            $$;
            """
        )
        op.execute(f"REVOKE ALL ON FUNCTION {name}{ARGS} FROM PUBLIC")
        op.execute(f"GRANT EXECUTE ON FUNCTION {name}{ARGS} TO {role}")
    op.execute(
        """
        CREATE INDEX ix_memories_alone
            ON memories (
                tenant_id, namespace_id, scope, (coalesce(user_id, '')), (coalesce(agent_id, '')),
                (coalesce(valid_from, created_at)), seq
            )
            WHERE session_id IS NULL AND namespace_id IS NOT NULL AND type = 'event'
        """
    )


def downgrade() -> None:
    for name in ("memvault_alone_before", "memvault_alone_after"):
        op.execute(f"DROP FUNCTION IF EXISTS {name}{ARGS}")
    op.execute("DROP INDEX IF EXISTS ix_memories_alone")
