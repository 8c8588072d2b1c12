"""Idempotency keys: a retried create (same Idempotency-Key) answers with the first response
instead of writing again.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import context, op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

CURRENT_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"


def _app_role() -> str:
    role = context.config.get_main_option("memvault.app_role") or "memvault_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"unsafe role name {role!r}")
    return role


def upgrade() -> None:
    role = _app_role()
    op.execute(
        """
        CREATE TABLE idempotency_keys (
            tenant_id uuid NOT NULL,
            key text NOT NULL,
            -- Who sent it and to what: the same key from another key holder or for another route
            -- is a different request.
            subject text NOT NULL,
            method text NOT NULL,
            path text NOT NULL,
            request_hash text NOT NULL,
            status integer,
            response jsonb,
            created_at timestamptz NOT NULL DEFAULT now(),
            completed_at timestamptz,
            CONSTRAINT pk_idempotency_keys PRIMARY KEY (tenant_id, key)
        );
        CREATE INDEX ix_idempotency_keys_created ON idempotency_keys (created_at);
        """
    )
    op.execute("ALTER TABLE idempotency_keys ENABLE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY tenant_isolation ON idempotency_keys "
        f"USING (tenant_id = {CURRENT_TENANT}) WITH CHECK (tenant_id = {CURRENT_TENANT})"
    )
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency_keys TO {role}")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS idempotency_keys")
