"""Maintenance: find a namespace's current memories embedded by another model in a few index
probes, so every search can afford to ask (re-embedding, docs/workers.md).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Partial on what search reads, so the predicate of the check matches the index exactly.
    op.execute(
        """
        CREATE INDEX ix_memories_model ON memories (tenant_id, namespace_id, embedding_model)
            WHERE superseded_at IS NULL AND state <> 'archived'
        """
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_memories_model")
