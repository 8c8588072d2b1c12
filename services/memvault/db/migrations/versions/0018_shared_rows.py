"""An index of each namespace's shared memories (scope 'namespace').

Reading as a user walks the scope chain: the namespace's shared memories and the user's own.
With no index that finds the shared ones, the only way PostgreSQL had to the rows a user may
read was the whole namespace, so a user-scoped search took the vector index and walked the
HNSW graph past every other user's memories until 50 of this user's passed (36 ms for a user
with 629 of 100,000 memories; docs/benchmarks.md). With this index and ix_memories_user the
planner can read the reader's rows (both levels) by index when they are few and rank them
exactly, and keeps the HNSW scan when they are many. Partial: user and session memories, which
in a namespace shared by many users are most of it, are not in it.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX ix_memories_shared_rows ON memories (tenant_id, namespace_id) WHERE scope = 'namespace'")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_memories_shared_rows")
