"""The dashboard's sign-in sessions (issue 24).

``web_sessions``: one row per browser signed in to /dashboard. The cookie holds a random token;
the row keeps only its SHA-256, so a copy of the table signs nobody in. A session ends when the
person signs out (``ended_at``), when it goes unused for the idle time (``expires_at`` slides
forward as it is used, never past ``created_at`` plus the absolute limit, both in
websessions/service.py), and with its user: deleting the user deletes its sessions, and a disabled
user's sessions stop working at once (the lookup checks the user on every page).

The cookie arrives before the tenant is known, so ``memvault_find_web_session`` (SECURITY
DEFINER, like memvault_find_oauth_user) finds the row by the token's hash; everything after runs
in the tenant's transaction under row-level security.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import context, op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

CURRENT_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"


def _app_role() -> str:
    role = context.config.get_main_option("memvault.app_role") or "memvault_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"unsafe role name {role!r}")
    return role


def upgrade() -> None:
    role = _app_role()
    schema = op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one()
    op.execute(
        """
        CREATE TABLE web_sessions (
            tenant_id uuid NOT NULL,
            id uuid NOT NULL DEFAULT gen_random_uuid(),
            user_id uuid NOT NULL,
            token_hash bytea NOT NULL,
            address text,
            user_agent text,
            created_at timestamptz NOT NULL DEFAULT now(),
            last_seen_at timestamptz NOT NULL DEFAULT now(),
            expires_at timestamptz NOT NULL,
            ended_at timestamptz,
            CONSTRAINT pk_web_sessions PRIMARY KEY (tenant_id, id),
            CONSTRAINT uq_web_sessions_token UNIQUE (token_hash),
            CONSTRAINT fk_web_sessions_user FOREIGN KEY (tenant_id, user_id)
                REFERENCES oauth_users (tenant_id, id) ON DELETE CASCADE
        )
        """
    )
    op.execute("CREATE INDEX ix_web_sessions_user ON web_sessions (tenant_id, user_id)")
    op.execute("ALTER TABLE web_sessions ENABLE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON web_sessions "
        f"USING (tenant_id = {CURRENT_TENANT}) WITH CHECK (tenant_id = {CURRENT_TENANT})"
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON web_sessions TO {role}")
    op.execute(
        f"""
        CREATE FUNCTION memvault_find_web_session(p_hash bytea)
        RETURNS TABLE (tenant_id uuid, id uuid, user_id uuid)
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, {schema}
        AS $$ SELECT s.tenant_id, s.id, s.user_id FROM {schema}.web_sessions s
            WHERE s.token_hash = p_hash AND s.ended_at IS NULL AND s.expires_at > now() $$
        """
    )
    op.execute("REVOKE ALL ON FUNCTION memvault_find_web_session(bytea) FROM PUBLIC")
    op.execute(f"GRANT EXECUTE ON FUNCTION memvault_find_web_session(bytea) TO {role}")


def downgrade() -> None:
    op.execute("DROP FUNCTION memvault_find_web_session(bytea)")
    op.execute("DROP TABLE web_sessions")
