"""OAuth 2.1 for the remote MCP endpoint: tenant users, registered clients, authorization codes,
grants with their rotating refresh tokens, and the keys that sign access tokens.

Users, codes, grants and refresh tokens belong to a tenant and sit behind row-level security like
every tenant table. Clients and signing keys are global: a client registers (RFC 7591) or names
its metadata document before anyone signs in, so no tenant exists for it yet, and it gains nothing
by registering; whatever it may reach comes from a tenant-bound grant. Signing keys belong to the
server, which is one issuer for all tenants.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import context, op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

CURRENT_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"
TENANT_TABLES = ("oauth_users", "oauth_codes", "oauth_grants", "oauth_refresh_tokens")


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
        CREATE TABLE oauth_clients (
            client_id text PRIMARY KEY,
            -- 'dcr': registered here (RFC 7591); 'cimd': a client ID metadata document we fetched.
            kind text NOT NULL,
            client_name text,
            redirect_uris text[] NOT NULL,
            grant_types text[] NOT NULL,
            scope text,
            metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
            created_at timestamptz NOT NULL DEFAULT now(),
            fetched_at timestamptz,
            CONSTRAINT ck_oauth_clients_kind CHECK (kind IN ('dcr', 'cimd'))
        );

        CREATE TABLE oauth_signing_keys (
            kid text PRIMARY KEY,
            alg text NOT NULL,
            private_pem text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            -- Set when a newer key takes over signing; the key is still published (and verifies)
            -- until every token it signed has expired.
            retired_at timestamptz
        );

        CREATE TABLE oauth_users (
            tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
            id uuid NOT NULL DEFAULT gen_random_uuid(),
            -- Lower-cased. One email signs in to one tenant, so the login page asks for no tenant.
            email text NOT NULL,
            name text NOT NULL DEFAULT '',
            password_hash text NOT NULL,
            scopes text[] NOT NULL DEFAULT '{read,write}',
            created_at timestamptz NOT NULL DEFAULT now(),
            last_login_at timestamptz,
            disabled_at timestamptz,
            CONSTRAINT pk_oauth_users PRIMARY KEY (tenant_id, id),
            CONSTRAINT uq_oauth_users_email UNIQUE (email),
            CONSTRAINT ck_oauth_users_scopes CHECK (scopes <@ ARRAY['read', 'write']::text[])
        );

        CREATE TABLE oauth_grants (
            tenant_id uuid NOT NULL,
            id uuid NOT NULL DEFAULT gen_random_uuid(),
            user_id uuid NOT NULL,
            client_id text NOT NULL REFERENCES oauth_clients(client_id) ON DELETE CASCADE,
            scopes text[] NOT NULL,
            namespaces text[] NOT NULL,
            resource text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            last_used_at timestamptz,
            revoked_at timestamptz,
            revoked_reason text,
            CONSTRAINT pk_oauth_grants PRIMARY KEY (tenant_id, id),
            CONSTRAINT fk_oauth_grants_user FOREIGN KEY (tenant_id, user_id)
                REFERENCES oauth_users(tenant_id, id) ON DELETE CASCADE
        );
        CREATE INDEX ix_oauth_grants_user ON oauth_grants (tenant_id, user_id);

        CREATE TABLE oauth_codes (
            tenant_id uuid NOT NULL,
            code_hash text NOT NULL,
            user_id uuid NOT NULL,
            client_id text NOT NULL REFERENCES oauth_clients(client_id) ON DELETE CASCADE,
            redirect_uri text NOT NULL,
            code_challenge text NOT NULL,
            scopes text[] NOT NULL,
            namespaces text[] NOT NULL,
            resource text NOT NULL,
            expires_at timestamptz NOT NULL,
            used_at timestamptz,
            -- The grant the code was exchanged for: a second use of the code revokes it.
            grant_id uuid,
            CONSTRAINT pk_oauth_codes PRIMARY KEY (tenant_id, code_hash),
            CONSTRAINT uq_oauth_codes_code_hash UNIQUE (code_hash),
            CONSTRAINT fk_oauth_codes_user FOREIGN KEY (tenant_id, user_id)
                REFERENCES oauth_users(tenant_id, id) ON DELETE CASCADE
        );

        CREATE TABLE oauth_refresh_tokens (
            tenant_id uuid NOT NULL,
            id uuid NOT NULL DEFAULT gen_random_uuid(),
            grant_id uuid NOT NULL,
            token_hash text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            expires_at timestamptz NOT NULL,
            -- Rotated: the token was exchanged once. Presenting it again revokes the whole grant.
            used_at timestamptz,
            CONSTRAINT pk_oauth_refresh_tokens PRIMARY KEY (tenant_id, id),
            CONSTRAINT uq_oauth_refresh_tokens_token_hash UNIQUE (token_hash),
            CONSTRAINT fk_oauth_refresh_tokens_grant FOREIGN KEY (tenant_id, grant_id)
                REFERENCES oauth_grants(tenant_id, id) ON DELETE CASCADE
        );
        CREATE INDEX ix_oauth_refresh_tokens_grant ON oauth_refresh_tokens (tenant_id, grant_id);
        """
    )
    for table in TENANT_TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING (tenant_id = {CURRENT_TENANT}) WITH CHECK (tenant_id = {CURRENT_TENANT})"
        )
        op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {role}")
    op.execute(f"GRANT SELECT, INSERT, UPDATE ON oauth_clients TO {role}")
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON oauth_signing_keys TO {role}")

    # A sign-in, an authorization code and a refresh token each arrive before their tenant is
    # known. As with API keys, these functions alone look past RLS, each returning only what
    # matches a secret's hash (or the email being signed in), never a listing.
    op.execute(
        f"""
        CREATE FUNCTION memvault_find_oauth_user(p_email text)
        RETURNS TABLE (tenant_id uuid, id uuid, password_hash text, disabled_at timestamptz)
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, {schema}
        AS $$
            SELECT u.tenant_id, u.id, u.password_hash, u.disabled_at
            FROM {schema}.oauth_users u WHERE u.email = p_email
        $$;
        CREATE FUNCTION memvault_find_oauth_code(p_hash text) RETURNS uuid
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, {schema}
        AS $$ SELECT c.tenant_id FROM {schema}.oauth_codes c WHERE c.code_hash = p_hash $$;
        CREATE FUNCTION memvault_find_refresh_token(p_hash text) RETURNS uuid
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, {schema}
        AS $$ SELECT r.tenant_id FROM {schema}.oauth_refresh_tokens r WHERE r.token_hash = p_hash $$;
        """
    )
    for fn in ("memvault_find_oauth_user(text)", "memvault_find_oauth_code(text)", "memvault_find_refresh_token(text)"):
        op.execute(f"REVOKE ALL ON FUNCTION {fn} FROM PUBLIC")
        op.execute(f"GRANT EXECUTE ON FUNCTION {fn} TO {role}")


def downgrade() -> None:
    for fn in ("memvault_find_oauth_user(text)", "memvault_find_oauth_code(text)", "memvault_find_refresh_token(text)"):
        op.execute(f"DROP FUNCTION IF EXISTS {fn}")
    for table in ("oauth_refresh_tokens", "oauth_codes", "oauth_grants", "oauth_users", "oauth_signing_keys"):
        op.execute(f"DROP TABLE IF EXISTS {table}")
    op.execute("DROP TABLE IF EXISTS oauth_clients")
