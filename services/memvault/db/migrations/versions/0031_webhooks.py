"""Webhooks (issue 31): subscriptions, and an outbox of deliveries written with the change.

``webhook_endpoints``: a tenant's subscription: the URL, the event types and namespaces it wants,
whether it is enabled (and why not), and its Standard Webhooks signing secret (``whsec_``...). A
rotated secret keeps signing beside the new one until ``previous_secret_expires_at``. The secrets
must be readable to sign with, like the OAuth signing keys: protect backups accordingly.

``webhook_deliveries`` is the outbox: one row per (event, endpoint), inserted in the same
transaction as the change that caused the event, so a change that commits has its deliveries and
one that rolls back has none. ``message_id`` is the event's stable `webhook-id` (every endpoint
and every retry of it sends the same). A sender claims due rows (``next_attempt_at``), posts them,
and records the outcome; ``status`` pending -> succeeded, or pending again with a later
``next_attempt_at``, or failed after the last retry. Rows are kept for the deliveries log.

Both are tenant tables under row-level security. Finding due deliveries across tenants is the
sender's owner-session sweep, like the job sweep (operator.py).

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import context, op

revision = "0031"
down_revision = "0030"
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
        CREATE TABLE webhook_endpoints (
            tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
            id uuid NOT NULL DEFAULT gen_random_uuid(),
            url text NOT NULL,
            description text NOT NULL DEFAULT '',
            events text[] NOT NULL,
            namespaces text[],
            enabled boolean NOT NULL DEFAULT true,
            disabled_reason text,
            secret text NOT NULL,
            previous_secret text,
            previous_secret_expires_at timestamptz,
            failing_since timestamptz,
            created_by text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_webhook_endpoints PRIMARY KEY (tenant_id, id)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE webhook_deliveries (
            tenant_id uuid NOT NULL,
            id uuid NOT NULL DEFAULT gen_random_uuid(),
            endpoint_id uuid NOT NULL,
            message_id text NOT NULL,
            event_type text NOT NULL,
            namespace text,
            payload jsonb NOT NULL,
            status text NOT NULL DEFAULT 'pending',
            attempts integer NOT NULL DEFAULT 0,
            next_attempt_at timestamptz NOT NULL DEFAULT now(),
            last_attempt_at timestamptz,
            response_status integer,
            response_excerpt text,
            latency_ms integer,
            error text,
            created_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_webhook_deliveries PRIMARY KEY (tenant_id, id),
            CONSTRAINT fk_webhook_deliveries_endpoint FOREIGN KEY (tenant_id, endpoint_id)
                REFERENCES webhook_endpoints (tenant_id, id) ON DELETE CASCADE,
            CONSTRAINT ck_webhook_deliveries_status CHECK (status IN ('pending', 'succeeded', 'failed'))
        )
        """
    )
    op.execute(
        "CREATE INDEX ix_webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'"
    )
    op.execute(
        "CREATE INDEX ix_webhook_deliveries_endpoint "
        "ON webhook_deliveries (tenant_id, endpoint_id, created_at DESC, id)"
    )
    for table in ("webhook_endpoints", "webhook_deliveries"):
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING (tenant_id = {CURRENT_TENANT}) WITH CHECK (tenant_id = {CURRENT_TENANT})"
        )
        op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {role}")


def downgrade() -> None:
    op.execute("DROP TABLE webhook_deliveries")
    op.execute("DROP TABLE webhook_endpoints")
