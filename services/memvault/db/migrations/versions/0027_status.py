"""The status page (issue 24): one health sample a minute, and the server's own latency histograms.

Both tables are global, not tenant tables: they hold the service's state and timings, never a
tenant's id, name or data, so they carry no tenant_id and no row-level security (like
oauth_clients and plans). The app role reads and writes them through an unscoped session.

``health_samples``: one row a minute, written by the scheduler's sampling tick (`memvault
scheduler`'s RQ cron with Redis, else `memvault serve` itself), kept 90 days. ``degraded`` names
the components that were not operational. A minute with no row is a minute nobody sampled (the
scheduler or the database away).

``latency_minutes``: per minute, door (rest, mcp, sdk) and kind (search, write), how many calls
fell into each bucket of a fixed log-spaced histogram (status/latency.py). Each process adds its
counts every few seconds (``ON CONFLICT DO UPDATE SET calls = calls + EXCLUDED.calls``), so
replicas share one histogram without coordinating; kept two days.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import context, op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def _app_role() -> str:
    role = context.config.get_main_option("memvault.app_role") or "memvault_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"unsafe role name {role!r}")
    return role


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE health_samples (
            minute timestamptz PRIMARY KEY,
            state text NOT NULL,
            degraded text[] NOT NULL DEFAULT '{}',
            CONSTRAINT ck_health_samples_minute CHECK (minute = date_trunc('minute', minute, 'UTC')),
            CONSTRAINT ck_health_samples_state CHECK (state IN ('operational', 'degraded', 'down'))
        )
        """
    )
    op.execute(
        """
        CREATE TABLE latency_minutes (
            minute timestamptz NOT NULL,
            door text NOT NULL,
            kind text NOT NULL,
            bucket smallint NOT NULL,
            calls bigint NOT NULL,
            CONSTRAINT pk_latency_minutes PRIMARY KEY (minute, door, kind, bucket),
            CONSTRAINT ck_latency_minutes_minute CHECK (minute = date_trunc('minute', minute, 'UTC'))
        )
        """
    )
    role = _app_role()
    # No tenant's data: the app role samples, adds and prunes without a tenant set.
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON health_samples TO {role}")
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON latency_minutes TO {role}")


def downgrade() -> None:
    op.execute("DROP TABLE latency_minutes")
    op.execute("DROP TABLE health_samples")
