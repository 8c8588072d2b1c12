"""Members, roles, invitations and sign-up (issue 23).

- `oauth_users.role`: owner, admin, member or viewer. Existing users keep exactly what they could
  do: those whose scopes held `write` become members, the rest viewers (no one is promoted to
  admin by a migration).
- `oauth_users.scopes` is now generated from the role (viewer: read; member: read, write; admin and
  owner: read, write, admin), so the two can never disagree. OAuth clients are still granted only
  `read`/`write` (oauth/schemas.py OAUTH_SCOPES): administration is not delegated to an MCP client.
- `oauth_users.email_verified_at`: a self-serve owner cannot sign in until the address is proven.
  Users made before this (by an admin key or the CLI) count as verified.
- memvault_find_oauth_user also returns whether the address is verified (sign-in precedes the tenant).
- `member_invitations`: an invitation by email with a role; its link is a signed token naming the
  row, which is spent by acceptance and ends by expiry or revocation.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import context, op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

CURRENT_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"
ROLES = "ARRAY['owner', 'admin', 'member', 'viewer']::text[]"
SCOPES_OF_ROLE = (
    "CASE role WHEN 'viewer' THEN ARRAY['read']::text[] WHEN 'member' THEN ARRAY['read', 'write']::text[] "
    "ELSE ARRAY['read', 'write', 'admin']::text[] END"
)


def _app_role() -> str:
    role = context.config.get_main_option("memvault.app_role") or "memvault_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"unsafe role name {role!r}")
    return role


def _find_user(*, verified: bool) -> None:
    role = _app_role()
    schema = op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one()
    extra_type = ", email_verified boolean" if verified else ""
    extra_col = ", u.email_verified_at IS NOT NULL" if verified else ""
    op.execute("DROP FUNCTION memvault_find_oauth_user(text)")
    op.execute(
        f"""
        CREATE FUNCTION memvault_find_oauth_user(p_email text)
        RETURNS TABLE (tenant_id uuid, id uuid, password_hash text, disabled_at timestamptz, tenant_name text
                       {extra_type})
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, {schema}
        AS $$ SELECT u.tenant_id, u.id, u.password_hash, u.disabled_at, t.name {extra_col}
            FROM {schema}.oauth_users u JOIN {schema}.tenants t ON t.id = u.tenant_id
            WHERE u.email = p_email ORDER BY u.created_at, u.tenant_id $$
        """
    )
    op.execute("REVOKE ALL ON FUNCTION memvault_find_oauth_user(text) FROM PUBLIC")
    op.execute(f"GRANT EXECUTE ON FUNCTION memvault_find_oauth_user(text) TO {role}")


def upgrade() -> None:
    op.execute("ALTER TABLE oauth_users ADD COLUMN role text")
    op.execute("UPDATE oauth_users SET role = CASE WHEN 'write' = ANY(scopes) THEN 'member' ELSE 'viewer' END")
    op.execute(
        f"""
        ALTER TABLE oauth_users
            ALTER COLUMN role SET NOT NULL,
            ALTER COLUMN role SET DEFAULT 'member',
            ADD CONSTRAINT ck_oauth_users_role CHECK (role = ANY ({ROLES})),
            DROP COLUMN scopes,
            ADD COLUMN scopes text[] GENERATED ALWAYS AS ({SCOPES_OF_ROLE}) STORED,
            ADD COLUMN email_verified_at timestamptz
        """
    )
    op.execute("UPDATE oauth_users SET email_verified_at = created_at")
    _find_user(verified=True)
    op.execute(
        f"""
        CREATE TABLE member_invitations (
            tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
            id uuid NOT NULL DEFAULT gen_random_uuid(),
            email text NOT NULL,
            role text NOT NULL,
            invited_by text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            expires_at timestamptz NOT NULL,
            accepted_at timestamptz,
            revoked_at timestamptz,
            user_id uuid,
            CONSTRAINT pk_member_invitations PRIMARY KEY (tenant_id, id),
            CONSTRAINT ck_member_invitations_role CHECK (role = ANY ({ROLES}))
        )
        """
    )
    op.execute("ALTER TABLE member_invitations ENABLE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON member_invitations "
        f"USING (tenant_id = {CURRENT_TENANT}) WITH CHECK (tenant_id = {CURRENT_TENANT})"
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON member_invitations TO {_app_role()}")


def downgrade() -> None:
    op.execute("DROP TABLE member_invitations")
    _find_user(verified=False)
    op.execute(
        """
        ALTER TABLE oauth_users
            DROP COLUMN email_verified_at,
            DROP COLUMN scopes,
            ADD COLUMN scopes text[] NOT NULL DEFAULT '{read,write}',
            ADD CONSTRAINT ck_oauth_users_scopes CHECK (scopes <@ ARRAY['read', 'write']::text[])
        """
    )
    op.execute("UPDATE oauth_users SET scopes = CASE WHEN role = 'viewer' THEN '{read}'::text[] ELSE scopes END")
    op.execute("ALTER TABLE oauth_users DROP COLUMN role")
