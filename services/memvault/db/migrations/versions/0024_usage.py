"""Usage metering (issue 23): hourly buckets of what each tenant used, by door, namespace, key
and operation.

The request path never writes here: each process counts in memory and adds its counts every few
seconds (metering/meter.py), so a row is only ever added to (``INSERT ... ON CONFLICT DO UPDATE
SET x = x + EXCLUDED.x``). Empty strings stand for "none" in the key columns (no namespace, an
internal call), so the primary key can hold them.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import context, op

revision = "0024"
down_revision = "0023"
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
        CREATE TABLE usage_hourly (
            tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
            hour timestamptz NOT NULL,
            door text NOT NULL,
            namespace text NOT NULL DEFAULT '',
            key text NOT NULL DEFAULT '',
            operation text NOT NULL,
            requests bigint NOT NULL DEFAULT 0,
            memories_written bigint NOT NULL DEFAULT 0,
            searches bigint NOT NULL DEFAULT 0,
            events_ingested bigint NOT NULL DEFAULT 0,
            tokens_embedded bigint NOT NULL DEFAULT 0,
            bytes_stored bigint NOT NULL DEFAULT 0,
            CONSTRAINT pk_usage_hourly PRIMARY KEY (tenant_id, hour, door, namespace, key, operation),
            CONSTRAINT ck_usage_hourly_hour CHECK (hour = date_trunc('hour', hour, 'UTC'))
        )
        """
    )
    op.execute("ALTER TABLE usage_hourly ENABLE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON usage_hourly "
        f"USING (tenant_id = {CURRENT_TENANT}) WITH CHECK (tenant_id = {CURRENT_TENANT})"
    )
    # Added to, never changed otherwise or removed by the application (a tenant's rows go with it).
    op.execute(f"GRANT SELECT, INSERT, UPDATE ON usage_hourly TO {_app_role()}")


def downgrade() -> None:
    op.execute("DROP TABLE usage_hourly")
