"""Plans: named sets of limits, stored as data (plans/limits.py names every limit).

- `plans (name, description, limits jsonb)`: global, readable by the application (every tenant may
  see what each plan allows), written only by the operator. Seeded with `free`, `pro`, `enterprise`
  and `unlimited`; null is no limit.
- `tenants.plan` now names a plan (foreign key) and defaults to `unlimited`: tenants made before
  plans existed were limited by nothing, and stay so until the operator sets their plan. Sign-up
  gives new tenants the plan of MEMVAULT_SIGNUP_PLAN (free).
- `tenants.plan_overrides`: single limits replaced for one tenant (a deal, a trial).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03
"""

from __future__ import annotations

import json

from alembic import context, op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

MB = 1024 * 1024
PLANS: dict[str, tuple[str, dict[str, int | None]]] = {
    "free": (
        "For trying memvault: small limits, no card.",
        {
            "key_reads_per_minute": 120,
            "key_writes_per_minute": 60,
            "key_searches_per_minute": 60,
            "tenant_reads_per_minute": 300,
            "tenant_writes_per_minute": 120,
            "tenant_searches_per_minute": 120,
            "concurrent_requests": 4,
            "memories": 10_000,
            "namespaces": 3,
            "api_keys": 5,
            "members": 3,
            "events_per_month": 10_000,
            "embedded_tokens_per_month": 2_000_000,
            "export_bytes": 50 * MB,
            "import_bytes": 10 * MB,
        },
    ),
    "pro": (
        "For an application in production.",
        {
            "key_reads_per_minute": 600,
            "key_writes_per_minute": 300,
            "key_searches_per_minute": 300,
            "tenant_reads_per_minute": 3_000,
            "tenant_writes_per_minute": 1_200,
            "tenant_searches_per_minute": 1_200,
            "concurrent_requests": 16,
            "memories": 1_000_000,
            "namespaces": 50,
            "api_keys": 50,
            "members": 25,
            "events_per_month": 1_000_000,
            "embedded_tokens_per_month": 200_000_000,
            "export_bytes": 1024 * MB,
            "import_bytes": 256 * MB,
        },
    ),
    "enterprise": (
        "For many applications and teams; caps on rates only.",
        {
            "key_reads_per_minute": 3_000,
            "key_writes_per_minute": 1_500,
            "key_searches_per_minute": 1_500,
            "tenant_reads_per_minute": 20_000,
            "tenant_writes_per_minute": 8_000,
            "tenant_searches_per_minute": 8_000,
            "concurrent_requests": 64,
            "api_keys": 500,
            "members": 500,
            "import_bytes": 1024 * MB,
        },
    ),
    "unlimited": ("No limits: the operator's own tenants and self-hosted installs.", {}),
}


def _app_role() -> str:
    role = context.config.get_main_option("memvault.app_role") or "memvault_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"unsafe role name {role!r}")
    return role


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE plans (
            name text NOT NULL,
            description text NOT NULL DEFAULT '',
            limits jsonb NOT NULL DEFAULT '{}'::jsonb,
            created_at timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT pk_plans PRIMARY KEY (name),
            CONSTRAINT ck_plans_limits_object CHECK (jsonb_typeof(limits) = 'object')
        )
        """
    )
    for name, (description, limits) in PLANS.items():
        op.get_bind().exec_driver_sql(
            "INSERT INTO plans (name, description, limits) VALUES (%(n)s, %(d)s, %(l)s::jsonb)",
            {"n": name, "d": description, "l": json.dumps(limits)},
        )
    op.execute(f"GRANT SELECT ON plans TO {_app_role()}")
    op.execute("UPDATE tenants SET plan = 'unlimited' WHERE plan NOT IN (SELECT name FROM plans)")
    op.execute(
        """
        ALTER TABLE tenants
            ALTER COLUMN plan SET DEFAULT 'unlimited',
            ADD COLUMN plan_overrides jsonb NOT NULL DEFAULT '{}'::jsonb,
            ADD CONSTRAINT fk_tenants_plan_plans FOREIGN KEY (plan) REFERENCES plans (name),
            ADD CONSTRAINT ck_tenants_plan_overrides_object CHECK (jsonb_typeof(plan_overrides) = 'object')
        """
    )


def downgrade() -> None:
    op.execute(
        """
        ALTER TABLE tenants
            DROP CONSTRAINT fk_tenants_plan_plans,
            DROP CONSTRAINT ck_tenants_plan_overrides_object,
            DROP COLUMN plan_overrides,
            ALTER COLUMN plan SET DEFAULT 'free'
        """
    )
    op.execute("DROP TABLE plans")
