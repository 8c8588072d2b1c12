"""Tenants, namespaces, API keys, memories, audit log; row-level security by tenant.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import context, op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TENANT_TABLES = ("namespaces", "api_keys", "memories", "audit_log")

# NULLIF: a transaction-local setting reads back as '' (not NULL) once its transaction ends,
# and '' must mean "no tenant", which matches no row.
CURRENT_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"


def _app_role() -> str:
    role = context.config.get_main_option("memvault.app_role") or "memvault_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"unsafe role name {role!r}")
    return role


def upgrade() -> None:
    role = _app_role()
    schema = op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one()

    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.execute(
        f"""
        DO $$ BEGIN
          IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{role}') THEN
            CREATE ROLE {role} NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
          END IF;
        END $$;
        """
    )

    op.execute(
        """
        CREATE TABLE tenants (
            id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            name text NOT NULL,
            plan text NOT NULL DEFAULT 'free',
            created_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT uq_tenants_name UNIQUE (name)
        );

        CREATE TABLE namespaces (
            tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
            id uuid NOT NULL DEFAULT gen_random_uuid(),
            name text NOT NULL,
            description text,
            settings jsonb NOT NULL DEFAULT '{}'::jsonb,
            created_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_namespaces PRIMARY KEY (tenant_id, id),
            CONSTRAINT uq_namespaces_tenant_id_name UNIQUE (tenant_id, name)
        );

        CREATE TABLE api_keys (
            tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
            id uuid NOT NULL DEFAULT gen_random_uuid(),
            prefix text NOT NULL,
            secret_hash text NOT NULL,
            name text NOT NULL DEFAULT '',
            scopes text[] NOT NULL,
            namespaces text[],
            default_namespace text,
            created_at timestamptz NOT NULL DEFAULT now(),
            last_used_at timestamptz,
            revoked_at timestamptz,
            CONSTRAINT pk_api_keys PRIMARY KEY (tenant_id, id),
            CONSTRAINT uq_api_keys_prefix UNIQUE (prefix),
            CONSTRAINT ck_api_keys_scopes CHECK (scopes <@ ARRAY['read', 'write', 'admin']::text[])
        );

        CREATE TABLE memories (
            tenant_id uuid NOT NULL,
            id uuid NOT NULL DEFAULT gen_random_uuid(),
            namespace_id uuid NOT NULL,
            type text NOT NULL,
            key text,
            content text NOT NULL,
            user_id text,
            agent_id text,
            session_id text,
            scope text NOT NULL DEFAULT 'namespace',
            metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
            importance real NOT NULL DEFAULT 0.5,
            confidence real NOT NULL DEFAULT 1.0,
            state text NOT NULL DEFAULT 'stable',
            valid_from timestamptz,
            valid_to timestamptz,
            recorded_at timestamptz NOT NULL DEFAULT now(),
            superseded_at timestamptz,
            superseded_by uuid,
            embedding vector(384),
            embedding_model text,
            tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
            content_hash text NOT NULL,
            access_count integer NOT NULL DEFAULT 0,
            last_accessed_at timestamptz,
            created_by text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_memories PRIMARY KEY (tenant_id, id),
            CONSTRAINT fk_memories_namespace FOREIGN KEY (tenant_id, namespace_id)
                REFERENCES namespaces(tenant_id, id) ON DELETE CASCADE,
            CONSTRAINT ck_memories_state CHECK (state IN ('tentative', 'stable', 'archived')),
            CONSTRAINT ck_memories_importance CHECK (importance >= 0 AND importance <= 1),
            CONSTRAINT ck_memories_confidence CHECK (confidence >= 0 AND confidence <= 1),
            CONSTRAINT ck_memories_valid_range CHECK (valid_to IS NULL OR valid_from IS NULL OR valid_to >= valid_from)
        );

        CREATE INDEX ix_memories_embedding ON memories
            USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
        CREATE INDEX ix_memories_tsv ON memories USING gin (tsv);
        CREATE INDEX ix_memories_list ON memories (tenant_id, namespace_id, created_at DESC, id DESC);
        CREATE INDEX ix_memories_key ON memories (tenant_id, namespace_id, type, key) WHERE key IS NOT NULL;
        CREATE INDEX ix_memories_user ON memories (tenant_id, namespace_id, user_id) WHERE user_id IS NOT NULL;
        CREATE INDEX ix_memories_session ON memories (tenant_id, namespace_id, session_id)
            WHERE session_id IS NOT NULL;
        CREATE INDEX ix_memories_hash ON memories (tenant_id, namespace_id, content_hash);

        CREATE TABLE audit_log (
            tenant_id uuid NOT NULL,
            id bigint GENERATED ALWAYS AS IDENTITY,
            at timestamptz NOT NULL DEFAULT now(),
            actor text NOT NULL,
            action text NOT NULL,
            namespace_id uuid,
            target_id text,
            detail jsonb NOT NULL DEFAULT '{}'::jsonb,
            CONSTRAINT pk_audit_log PRIMARY KEY (tenant_id, id)
        );
        CREATE INDEX ix_audit_log_at ON audit_log (tenant_id, at DESC);
        """
    )

    # Isolation in depth: the app role only ever sees rows of the tenant set in its transaction.
    op.execute("ALTER TABLE tenants ENABLE ROW LEVEL SECURITY")
    op.execute(f"CREATE POLICY tenant_isolation ON tenants USING (id = {CURRENT_TENANT})")
    for table in TENANT_TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING (tenant_id = {CURRENT_TENANT}) WITH CHECK (tenant_id = {CURRENT_TENANT})"
        )

    op.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
    op.execute(f"GRANT SELECT ON tenants TO {role}")
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON namespaces, api_keys, memories TO {role}")
    # The audit log is append-only for the application.
    op.execute(f"GRANT SELECT, INSERT ON audit_log TO {role}")

    # An API key arrives before its tenant is known, so finding it must look past RLS. This one
    # function does, returning only the row whose non-secret prefix matches; the caller then
    # verifies the secret's hash.
    op.execute(
        f"""
        CREATE FUNCTION memvault_find_api_key(p_prefix text)
        RETURNS TABLE (id uuid, tenant_id uuid, secret_hash text, name text, scopes text[],
                       namespaces text[], default_namespace text, revoked_at timestamptz,
                       last_used_at timestamptz)
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, {schema}
        AS $$
            SELECT k.id, k.tenant_id, k.secret_hash, k.name, k.scopes, k.namespaces,
                   k.default_namespace, k.revoked_at, k.last_used_at
            FROM {schema}.api_keys k WHERE k.prefix = p_prefix
        $$;
        REVOKE ALL ON FUNCTION memvault_find_api_key(text) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION memvault_find_api_key(text) TO {role};
        """
    )


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS memvault_find_api_key(text)")
    for table in ("audit_log", "memories", "api_keys", "namespaces", "tenants"):
        op.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
