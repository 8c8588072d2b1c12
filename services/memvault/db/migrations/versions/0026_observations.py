"""Session observations (issue 28, part 3): what each conversation was about, its decisions and
its open questions, written by the extraction job for every session it touches.

One row per session, replaced whenever extraction runs on new events of that session; it goes
with its session (a hard forget of a user or a session erases it too). The expression index on
events lets a search across kinds (``kinds: [messages]``) find messages by their words.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import context, op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

CURRENT_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"


def _app_role() -> str:
    role = context.config.get_main_option("memvault.app_role") or "memvault_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"unsafe role name {role!r}")
    return role


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE observations (
            tenant_id uuid NOT NULL,
            namespace_id uuid NOT NULL,
            session_id text NOT NULL,
            user_id text,
            summary text NOT NULL,
            topics text[] NOT NULL DEFAULT '{}',
            decisions text[] NOT NULL DEFAULT '{}',
            open_questions text[] NOT NULL DEFAULT '{}',
            observed_by text NOT NULL,
            message_count integer NOT NULL,
            last_event_at timestamptz NOT NULL,
            job_id uuid,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_observations PRIMARY KEY (tenant_id, namespace_id, session_id),
            CONSTRAINT fk_observations_session FOREIGN KEY (tenant_id, namespace_id, session_id)
                REFERENCES sessions (tenant_id, namespace_id, id) ON DELETE CASCADE
        )
        """
    )
    op.execute("ALTER TABLE observations ENABLE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON observations "
        f"USING (tenant_id = {CURRENT_TENANT}) WITH CHECK (tenant_id = {CURRENT_TENANT})"
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON observations TO {_app_role()}")
    op.execute("CREATE INDEX ix_events_words ON events USING gin (to_tsvector('english', content))")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_events_words")
    op.execute("DROP TABLE observations")
