"""Contradictions between memories (issue 28, part 3).

A caller marks two memories of its tenant as contradicting each other; the mark stays `open`,
and is shown on the search hits of either memory, until someone resolves it (keeping one and
archiving the other, keeping both, or with a note). At most one open mark per pair, whichever
way round it was named. A memory deleted for good takes its marks with it.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import context, op

revision = "0025"
down_revision = "0024"
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
        CREATE TABLE contradictions (
            tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
            id uuid NOT NULL DEFAULT gen_random_uuid(),
            namespace_id uuid NOT NULL,
            memory_id uuid NOT NULL,
            other_id uuid NOT NULL,
            note text,
            state text NOT NULL DEFAULT 'open',
            resolution text,
            kept_id uuid,
            resolution_note text,
            created_by text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            resolved_by text,
            resolved_at timestamptz,
            CONSTRAINT pk_contradictions PRIMARY KEY (tenant_id, id),
            CONSTRAINT fk_contradictions_namespace FOREIGN KEY (tenant_id, namespace_id)
                REFERENCES namespaces (tenant_id, id) ON DELETE CASCADE,
            CONSTRAINT fk_contradictions_memory FOREIGN KEY (tenant_id, memory_id)
                REFERENCES memories (tenant_id, id) ON DELETE CASCADE,
            CONSTRAINT fk_contradictions_other FOREIGN KEY (tenant_id, other_id)
                REFERENCES memories (tenant_id, id) ON DELETE CASCADE,
            CONSTRAINT ck_contradictions_pair CHECK (memory_id <> other_id),
            CONSTRAINT ck_contradictions_state CHECK (state IN ('open', 'resolved')),
            CONSTRAINT ck_contradictions_resolution CHECK (
                (state = 'open' AND resolution IS NULL AND resolved_at IS NULL)
                OR (state = 'resolved' AND resolution IN ('keep_one', 'keep_both', 'note') AND resolved_at IS NOT NULL)
            )
        )
        """
    )
    op.execute(
        "CREATE UNIQUE INDEX uq_contradictions_open_pair ON contradictions "
        "(tenant_id, LEAST(memory_id, other_id), GREATEST(memory_id, other_id)) WHERE state = 'open'"
    )
    # Search asks which marks name its hits on either side; a memory deleted for good finds its
    # marks (the foreign keys' other side) the same way.
    op.execute("CREATE INDEX ix_contradictions_memory ON contradictions (tenant_id, memory_id)")
    op.execute("CREATE INDEX ix_contradictions_other ON contradictions (tenant_id, other_id)")
    op.execute("CREATE INDEX ix_contradictions_list ON contradictions (tenant_id, namespace_id, created_at DESC, id)")
    op.execute("ALTER TABLE contradictions ENABLE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON contradictions "
        f"USING (tenant_id = {CURRENT_TENANT}) WITH CHECK (tenant_id = {CURRENT_TENANT})"
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON contradictions TO {_app_role()}")


def downgrade() -> None:
    op.execute("DROP TABLE contradictions")
