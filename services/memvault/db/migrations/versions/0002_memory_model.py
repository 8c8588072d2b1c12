"""Memory model: scope chain, supersession history, events and sessions, jobs, entities and
relations, reasoning traces; row-level security on every new table.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import context, op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

CURRENT_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"
# System-scope memories live in this reserved tenant and are readable from every tenant.
SYSTEM_TENANT = "00000000-0000-0000-0000-000000000000"

NEW_TENANT_TABLES = (
    "memory_history",
    "events",
    "sessions",
    "jobs",
    "entities",
    "relations",
    "memory_entities",
    "traces",
    "trace_steps",
)


def _app_role() -> str:
    role = context.config.get_main_option("memvault.app_role") or "memvault_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"unsafe role name {role!r}")
    return role


def upgrade() -> None:
    role = _app_role()
    op.execute(
        f"INSERT INTO tenants (id, name, plan) VALUES ('{SYSTEM_TENANT}', '__system__', 'system') "
        "ON CONFLICT DO NOTHING"
    )
    op.execute(
        f"""
        ALTER TABLE memories ALTER COLUMN namespace_id DROP NOT NULL;
        ALTER TABLE memories ADD COLUMN supersedes uuid;
        ALTER TABLE memories ADD COLUMN source_event_ids uuid[] NOT NULL DEFAULT '{{}}';
        ALTER TABLE memories ADD CONSTRAINT ck_memories_scope
            CHECK (scope IN ('session', 'user', 'namespace', 'tenant', 'system'));
        -- Tenant- and system-scope memories belong to no namespace; every other scope to one.
        ALTER TABLE memories ADD CONSTRAINT ck_memories_scope_namespace
            CHECK ((scope IN ('tenant', 'system')) = (namespace_id IS NULL));
        ALTER TABLE memories ADD CONSTRAINT ck_memories_scope_owner
            CHECK ((scope <> 'session' OR session_id IS NOT NULL) AND (scope <> 'user' OR user_id IS NOT NULL));
        -- One current memory per (scope, owner, type, key): a concurrent second writer of the same
        -- key fails here instead of leaving two current versions.
        CREATE UNIQUE INDEX uq_memories_current_key ON memories (
            tenant_id,
            COALESCE(namespace_id, '{SYSTEM_TENANT}'::uuid),
            scope,
            (CASE scope WHEN 'session' THEN session_id WHEN 'user' THEN user_id ELSE '' END),
            type,
            key
        ) WHERE key IS NOT NULL AND superseded_at IS NULL;
        CREATE INDEX ix_memories_shared ON memories (tenant_id, scope, created_at DESC, id DESC)
            WHERE namespace_id IS NULL;

        CREATE TABLE memory_history (
            tenant_id uuid NOT NULL,
            id bigint GENERATED ALWAYS AS IDENTITY,
            memory_id uuid NOT NULL,
            action text NOT NULL,
            actor text NOT NULL,
            at timestamptz NOT NULL DEFAULT clock_timestamp(),
            changed_fields text[] NOT NULL DEFAULT '{{}}',
            snapshot jsonb NOT NULL,
            CONSTRAINT pk_memory_history PRIMARY KEY (tenant_id, id),
            CONSTRAINT fk_memory_history_memory FOREIGN KEY (tenant_id, memory_id)
                REFERENCES memories(tenant_id, id) ON DELETE CASCADE
        );
        CREATE INDEX ix_memory_history_memory ON memory_history (tenant_id, memory_id, id);

        CREATE TABLE jobs (
            tenant_id uuid NOT NULL,
            id uuid NOT NULL DEFAULT gen_random_uuid(),
            namespace_id uuid,
            kind text NOT NULL,
            job_key text,
            status text NOT NULL DEFAULT 'queued',
            payload jsonb NOT NULL DEFAULT '{{}}'::jsonb,
            progress real,
            result jsonb,
            error text,
            attempts integer NOT NULL DEFAULT 0,
            created_by text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            started_at timestamptz,
            finished_at timestamptz,
            updated_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_jobs PRIMARY KEY (tenant_id, id),
            CONSTRAINT fk_jobs_namespace FOREIGN KEY (tenant_id, namespace_id)
                REFERENCES namespaces(tenant_id, id) ON DELETE CASCADE,
            CONSTRAINT ck_jobs_status CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
            CONSTRAINT uq_jobs_key UNIQUE (tenant_id, kind, job_key)
        );
        CREATE INDEX ix_jobs_status ON jobs (tenant_id, status, created_at);

        CREATE TABLE events (
            tenant_id uuid NOT NULL,
            id uuid NOT NULL DEFAULT gen_random_uuid(),
            namespace_id uuid NOT NULL,
            seq bigint GENERATED ALWAYS AS IDENTITY,
            session_id text NOT NULL,
            user_id text,
            role text NOT NULL,
            speaker text,
            content text NOT NULL,
            metadata jsonb NOT NULL DEFAULT '{{}}'::jsonb,
            occurred_at timestamptz NOT NULL DEFAULT now(),
            recorded_at timestamptz NOT NULL DEFAULT now(),
            job_id uuid,
            created_by text NOT NULL,
            CONSTRAINT pk_events PRIMARY KEY (tenant_id, id),
            CONSTRAINT fk_events_namespace FOREIGN KEY (tenant_id, namespace_id)
                REFERENCES namespaces(tenant_id, id) ON DELETE CASCADE,
            CONSTRAINT ck_events_role CHECK (role IN ('user', 'participant', 'assistant', 'tool', 'system'))
        );
        CREATE INDEX ix_events_session ON events (tenant_id, namespace_id, session_id, occurred_at, seq);
        CREATE INDEX ix_events_user ON events (tenant_id, namespace_id, user_id) WHERE user_id IS NOT NULL;

        CREATE TABLE sessions (
            tenant_id uuid NOT NULL,
            namespace_id uuid NOT NULL,
            id text NOT NULL,
            user_id text,
            started_at timestamptz NOT NULL,
            last_event_at timestamptz NOT NULL,
            message_count integer NOT NULL DEFAULT 0,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_sessions PRIMARY KEY (tenant_id, namespace_id, id),
            CONSTRAINT fk_sessions_namespace FOREIGN KEY (tenant_id, namespace_id)
                REFERENCES namespaces(tenant_id, id) ON DELETE CASCADE
        );
        CREATE INDEX ix_sessions_recent ON sessions (tenant_id, namespace_id, last_event_at DESC, id DESC);
        CREATE INDEX ix_sessions_user ON sessions (tenant_id, namespace_id, user_id) WHERE user_id IS NOT NULL;

        CREATE TABLE entities (
            tenant_id uuid NOT NULL,
            id uuid NOT NULL DEFAULT gen_random_uuid(),
            namespace_id uuid NOT NULL,
            name text NOT NULL,
            type text NOT NULL,
            aliases text[] NOT NULL DEFAULT '{{}}',
            description text,
            metadata jsonb NOT NULL DEFAULT '{{}}'::jsonb,
            created_by text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_entities PRIMARY KEY (tenant_id, id),
            CONSTRAINT fk_entities_namespace FOREIGN KEY (tenant_id, namespace_id)
                REFERENCES namespaces(tenant_id, id) ON DELETE CASCADE,
            CONSTRAINT ck_entities_type
                CHECK (type IN ('person', 'organization', 'location', 'object', 'event', 'concept', 'other'))
        );
        CREATE UNIQUE INDEX uq_entities_name ON entities (tenant_id, namespace_id, type, lower(name));
        CREATE INDEX ix_entities_list ON entities (tenant_id, namespace_id, created_at DESC, id DESC);
        CREATE INDEX ix_entities_aliases ON entities USING gin (aliases);

        CREATE TABLE relations (
            tenant_id uuid NOT NULL,
            id uuid NOT NULL DEFAULT gen_random_uuid(),
            namespace_id uuid NOT NULL,
            source_id uuid NOT NULL,
            type text NOT NULL,
            target_id uuid NOT NULL,
            valid_from timestamptz,
            valid_to timestamptz,
            confidence real NOT NULL DEFAULT 1.0,
            metadata jsonb NOT NULL DEFAULT '{{}}'::jsonb,
            created_by text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_relations PRIMARY KEY (tenant_id, id),
            CONSTRAINT fk_relations_namespace FOREIGN KEY (tenant_id, namespace_id)
                REFERENCES namespaces(tenant_id, id) ON DELETE CASCADE,
            CONSTRAINT fk_relations_source FOREIGN KEY (tenant_id, source_id)
                REFERENCES entities(tenant_id, id) ON DELETE CASCADE,
            CONSTRAINT fk_relations_target FOREIGN KEY (tenant_id, target_id)
                REFERENCES entities(tenant_id, id) ON DELETE CASCADE,
            CONSTRAINT ck_relations_confidence CHECK (confidence >= 0 AND confidence <= 1),
            CONSTRAINT ck_relations_valid_range
                CHECK (valid_to IS NULL OR valid_from IS NULL OR valid_to >= valid_from)
        );
        CREATE INDEX ix_relations_source ON relations (tenant_id, source_id);
        CREATE INDEX ix_relations_target ON relations (tenant_id, target_id);

        CREATE TABLE memory_entities (
            tenant_id uuid NOT NULL,
            memory_id uuid NOT NULL,
            entity_id uuid NOT NULL,
            CONSTRAINT pk_memory_entities PRIMARY KEY (tenant_id, memory_id, entity_id),
            CONSTRAINT fk_memory_entities_memory FOREIGN KEY (tenant_id, memory_id)
                REFERENCES memories(tenant_id, id) ON DELETE CASCADE,
            CONSTRAINT fk_memory_entities_entity FOREIGN KEY (tenant_id, entity_id)
                REFERENCES entities(tenant_id, id) ON DELETE CASCADE
        );
        CREATE INDEX ix_memory_entities_entity ON memory_entities (tenant_id, entity_id);

        CREATE TABLE traces (
            tenant_id uuid NOT NULL,
            id uuid NOT NULL DEFAULT gen_random_uuid(),
            namespace_id uuid NOT NULL,
            task text NOT NULL,
            status text NOT NULL DEFAULT 'open',
            outcome text,
            success boolean,
            user_id text,
            agent_id text,
            session_id text,
            metadata jsonb NOT NULL DEFAULT '{{}}'::jsonb,
            embedding vector(384),
            embedding_model text,
            tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', task || ' ' || coalesce(outcome, ''))) STORED,
            step_count integer NOT NULL DEFAULT 0,
            created_by text NOT NULL,
            started_at timestamptz NOT NULL DEFAULT now(),
            completed_at timestamptz,
            CONSTRAINT pk_traces PRIMARY KEY (tenant_id, id),
            CONSTRAINT fk_traces_namespace FOREIGN KEY (tenant_id, namespace_id)
                REFERENCES namespaces(tenant_id, id) ON DELETE CASCADE,
            CONSTRAINT ck_traces_status CHECK (status IN ('open', 'completed'))
        );
        CREATE INDEX ix_traces_embedding ON traces
            USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
        CREATE INDEX ix_traces_tsv ON traces USING gin (tsv);
        CREATE INDEX ix_traces_list ON traces (tenant_id, namespace_id, started_at DESC, id DESC);

        CREATE TABLE trace_steps (
            tenant_id uuid NOT NULL,
            trace_id uuid NOT NULL,
            seq integer NOT NULL,
            thought text,
            action text,
            observation text,
            tool_name text,
            tool_args jsonb,
            tool_result jsonb,
            at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_trace_steps PRIMARY KEY (tenant_id, trace_id, seq),
            CONSTRAINT fk_trace_steps_trace FOREIGN KEY (tenant_id, trace_id)
                REFERENCES traces(tenant_id, id) ON DELETE CASCADE
        );

        -- Operator keys (granted only from the CLI) may write system-scope memories.
        ALTER TABLE api_keys DROP CONSTRAINT ck_api_keys_scopes;
        ALTER TABLE api_keys ADD CONSTRAINT ck_api_keys_scopes
            CHECK (scopes <@ ARRAY['read', 'write', 'admin', 'operator']::text[]);

        CREATE INDEX ix_audit_log_target ON audit_log (tenant_id, target_id) WHERE target_id IS NOT NULL;
        """
    )

    for table in NEW_TENANT_TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING (tenant_id = {CURRENT_TENANT}) WITH CHECK (tenant_id = {CURRENT_TENANT})"
        )
    # System-scope memories are read by every tenant (but not by a session bound to none); only a
    # transaction bound to the system tenant itself (an operator's) can write or change them.
    op.execute(
        f"CREATE POLICY system_read ON memories FOR SELECT "
        f"USING (tenant_id = '{SYSTEM_TENANT}'::uuid AND scope = 'system' AND {CURRENT_TENANT} IS NOT NULL)"
    )

    op.execute(
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON sessions, jobs, entities, relations, memory_entities, "
        f"traces, trace_steps TO {role}"
    )
    # Events and history are append-only for the application, except for a hard forget.
    op.execute(f"GRANT SELECT, INSERT, DELETE ON events, memory_history TO {role}")


def downgrade() -> None:
    op.execute("DROP POLICY IF EXISTS system_read ON memories")
    op.execute("DROP INDEX IF EXISTS ix_audit_log_target")
    for table in reversed(NEW_TENANT_TABLES):
        op.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
    op.execute(
        """
        DROP INDEX IF EXISTS ix_memories_shared;
        DROP INDEX IF EXISTS uq_memories_current_key;
        ALTER TABLE memories DROP CONSTRAINT IF EXISTS ck_memories_scope_owner;
        ALTER TABLE memories DROP CONSTRAINT IF EXISTS ck_memories_scope_namespace;
        ALTER TABLE memories DROP CONSTRAINT IF EXISTS ck_memories_scope;
        ALTER TABLE memories DROP COLUMN IF EXISTS source_event_ids;
        ALTER TABLE memories DROP COLUMN IF EXISTS supersedes;
        DELETE FROM memories WHERE namespace_id IS NULL;
        ALTER TABLE memories ALTER COLUMN namespace_id SET NOT NULL;
        """
    )
    op.execute("DELETE FROM tenants WHERE id = '00000000-0000-0000-0000-000000000000'")
