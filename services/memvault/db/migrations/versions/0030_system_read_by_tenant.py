"""System-scope memories are read by tenant alone: the policy no longer looks at `scope`.

Migration 0002's ``system_read`` policy admitted a row of the system tenant whose ``scope`` is
'system'. Every policy of a table is ORed into every query on it, so each read of a tenant's own
memories carried ``scope`` in its filter too; no index holds ``scope``, so a count or a capped
count of a namespace (the dashboard's namespaces page, a plan's memory quota) could not be an
index-only scan and read the whole table instead: 85-165 ms at 100,000 memories under the app
role, 3 ms as the owner (docs/benchmarks.md, "The account dashboard").

The system tenant holds system-scope memories only (memories/service.py writes to it for
scope 'system' alone); a CHECK now makes that a rule of the table, and the policy says the same
with the tenant column alone: what each tenant reads is unchanged.

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None

CURRENT_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"
SYSTEM_TENANT = "00000000-0000-0000-0000-000000000000"


def upgrade() -> None:
    op.execute(
        "ALTER TABLE memories ADD CONSTRAINT ck_memories_system_tenant_scope "
        f"CHECK (tenant_id <> '{SYSTEM_TENANT}'::uuid OR scope = 'system')"
    )
    op.execute(
        f"ALTER POLICY system_read ON memories "
        f"USING (tenant_id = '{SYSTEM_TENANT}'::uuid AND {CURRENT_TENANT} IS NOT NULL)"
    )


def downgrade() -> None:
    op.execute(
        f"ALTER POLICY system_read ON memories "
        f"USING (tenant_id = '{SYSTEM_TENANT}'::uuid AND scope = 'system' AND {CURRENT_TENANT} IS NOT NULL)"
    )
    op.execute("ALTER TABLE memories DROP CONSTRAINT ck_memories_system_tenant_scope")
