"""Inferred conversations (issue 30): events stored without a session id, by owner and session
order.

An event without a ``session_id`` has as neighbours (the search's context channel, the
``neighbours`` option) the events of the same owner (scope, user, agent), also without one, just
before and after it in session order within a gap (retrieval/sql/inferred.py). This index makes
each such lookup one probe, as ``ix_memories_session`` does for memories with a session id; the
two cover disjoint rows, and other kinds of memory without a session are in neither. The owner's
NULLs are spelled '' so that equality finds them.

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE INDEX ix_memories_alone
            ON memories (
                tenant_id, namespace_id, scope, (coalesce(user_id, '')), (coalesce(agent_id, '')),
                (coalesce(valid_from, created_at)), seq
            )
            WHERE session_id IS NULL AND namespace_id IS NOT NULL AND type = 'event'
        """
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_memories_alone")
