"""Periodic maintenance and job cancel: when each namespace's scheduled maintenance last ran, and
when a running job was asked to stop (docs/workers.md).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # On the namespace row rather than a table of its own: the scheduler's compare-and-set on it
    # is what makes two schedulers (or a retried tick) claim a run once, under the tenant's RLS.
    op.execute("ALTER TABLE namespaces ADD COLUMN maintenance_run_at timestamptz")
    # The scheduler's cross-tenant scan reads only namespaces that have a schedule.
    op.execute(
        "CREATE INDEX ix_namespaces_maintenance ON namespaces (maintenance_run_at) WHERE settings ? 'maintenance'"
    )
    # Set on a running job by POST /v1/jobs/{id}/cancel; the job stops at its next batch.
    op.execute("ALTER TABLE jobs ADD COLUMN cancel_requested_at timestamptz")


def downgrade() -> None:
    op.execute("ALTER TABLE jobs DROP COLUMN IF EXISTS cancel_requested_at")
    op.execute("DROP INDEX IF EXISTS ix_namespaces_maintenance")
    op.execute("ALTER TABLE namespaces DROP COLUMN IF EXISTS maintenance_run_at")
