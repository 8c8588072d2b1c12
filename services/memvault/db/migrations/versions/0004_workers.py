"""Workers: find the memories extracted from given events quickly (extraction re-runs skip the
events that already have memories; forget-by-event follows provenance).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX ix_memories_source_events ON memories USING gin (source_event_ids)")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_memories_source_events")
