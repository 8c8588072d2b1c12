"""Tenant users belong to their tenant alone, and reach only the namespaces they were given.

- `oauth_users.email` was unique across tenants, so creating a user told one tenant that an
  address was a user of some other tenant (409), and let a tenant reserve addresses for itself.
  It is now unique per tenant; sign-in finds the address in every tenant and checks the password
  against each (docs/auth.md).
- `oauth_users.namespaces` (NULL: every namespace of the tenant) is what the user may consent to
  share. A namespace-limited admin key creates users limited to its own namespaces, so a user it
  makes cannot be signed in to reach further than the key.
- memvault_find_oauth_user returns every match with its tenant's name, for the account chooser.
- `oauth_clients.granted_at`: when a user first let the client in. Until then the client is a
  stranger, and a broken authorization request from it gets an error page rather than a redirect
  to its URI (RFC 9700 §4.11: otherwise anyone registers a URI and uses us as an open redirector).
- `oauth_spent_tickets`: a sign-in ticket (the signed proof of a password, carried by the consent
  page) answers consent once; its id is recorded here until it would have expired anyway.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import context, op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

CURRENT_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"


def _app_role() -> str:
    role = context.config.get_main_option("memvault.app_role") or "memvault_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"unsafe role name {role!r}")
    return role


def _find_user(schema: str, *, with_tenant_name: bool) -> str:
    if with_tenant_name:
        returns = "tenant_id uuid, id uuid, password_hash text, disabled_at timestamptz, tenant_name text"
        body = f"""SELECT u.tenant_id, u.id, u.password_hash, u.disabled_at, t.name
            FROM {schema}.oauth_users u JOIN {schema}.tenants t ON t.id = u.tenant_id
            WHERE u.email = p_email ORDER BY u.created_at, u.tenant_id"""
    else:
        returns = "tenant_id uuid, id uuid, password_hash text, disabled_at timestamptz"
        body = f"""SELECT u.tenant_id, u.id, u.password_hash, u.disabled_at
            FROM {schema}.oauth_users u WHERE u.email = p_email"""
    return f"""
        CREATE FUNCTION memvault_find_oauth_user(p_email text)
        RETURNS TABLE ({returns})
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, {schema}
        AS $$ {body} $$
    """


def _replace_find_user(*, with_tenant_name: bool) -> None:
    role = _app_role()
    schema = op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one()
    op.execute("DROP FUNCTION memvault_find_oauth_user(text)")
    op.execute(_find_user(schema, with_tenant_name=with_tenant_name))
    op.execute("REVOKE ALL ON FUNCTION memvault_find_oauth_user(text) FROM PUBLIC")
    op.execute(f"GRANT EXECUTE ON FUNCTION memvault_find_oauth_user(text) TO {role}")


def upgrade() -> None:
    op.execute("ALTER TABLE oauth_users ADD COLUMN namespaces text[]")
    op.execute("ALTER TABLE oauth_users DROP CONSTRAINT uq_oauth_users_email")
    op.execute("ALTER TABLE oauth_users ADD CONSTRAINT uq_oauth_users_tenant_email UNIQUE (tenant_id, email)")
    # Sign-in looks an address up before it knows the tenant.
    op.execute("CREATE INDEX ix_oauth_users_email ON oauth_users (email)")
    _replace_find_user(with_tenant_name=True)
    op.execute(
        """
        CREATE TABLE oauth_spent_tickets (
            tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
            ticket_id text NOT NULL,
            expires_at timestamptz NOT NULL,
            CONSTRAINT pk_oauth_spent_tickets PRIMARY KEY (tenant_id, ticket_id)
        )
        """
    )
    op.execute("ALTER TABLE oauth_clients ADD COLUMN granted_at timestamptz")
    # Clients someone already let in keep being answered at their redirect URI.
    op.execute(
        "UPDATE oauth_clients c SET granted_at = now() WHERE EXISTS "
        "(SELECT 1 FROM oauth_grants g WHERE g.client_id = c.client_id)"
    )
    op.execute("ALTER TABLE oauth_spent_tickets ENABLE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON oauth_spent_tickets "
        f"USING (tenant_id = {CURRENT_TENANT}) WITH CHECK (tenant_id = {CURRENT_TENANT})"
    )
    op.execute(f"GRANT SELECT, INSERT, DELETE ON oauth_spent_tickets TO {_app_role()}")


def downgrade() -> None:
    op.execute("DROP TABLE oauth_spent_tickets")
    op.execute("ALTER TABLE oauth_clients DROP COLUMN granted_at")
    # Fails, as it should, if an address is now a user in two tenants.
    _replace_find_user(with_tenant_name=False)
    op.execute("DROP INDEX ix_oauth_users_email")
    op.execute("ALTER TABLE oauth_users DROP CONSTRAINT uq_oauth_users_tenant_email")
    op.execute("ALTER TABLE oauth_users ADD CONSTRAINT uq_oauth_users_email UNIQUE (email)")
    op.execute("ALTER TABLE oauth_users DROP COLUMN namespaces")
