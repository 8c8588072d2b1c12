"""How many memories the planner takes the transaction's tenant to have.

An unfiltered search keeps one plan per connection (retrieval/sql/settings.py). PostgreSQL prices
that plan by the row-level security condition, whose tenant setting it reads while planning: the
plan is made for the tenant of the transaction that made it. The statistics of
``memories.tenant_id`` single out the largest tenants (their most common values) and price every
other tenant alike, as an average one. A plan made for a tenant with no memories (a new sign-up's
first search, or the start-up warm-up's) took any tenant for one row, and a large tenant's search
on that connection then read its whole tenant for each candidate's session neighbours: 4-6 s at
100,000 memories instead of 20 ms (docs/benchmarks.md).

A tenant transaction asks this function how large the planner takes its tenant to be, and marks
its statements with it, so that their kept plans stay apart from tenants priced otherwise
(db/planned.py). ``pg_stats`` hides the statistics of a
table under row-level security from the app role, so the function runs as the owner; it answers
for the transaction's own tenant only, NULL when the statistics do not single it out.

Revision ID: 0038
Revises: 0037
Create Date: 2026-12-07
"""

from __future__ import annotations

import importlib
from typing import Any

from alembic import op

revision = "0038"
down_revision = "0037"
branch_labels = None
depends_on = None


def _revision(module: str) -> Any:
    return importlib.import_module(f"memvault.db.migrations.versions.{module}")


SEARCH_FUNCTIONS = _revision("0016_search_functions_tenant")
NAME = "memvault_tenant_rows_planned"


def upgrade() -> None:
    schema, path = SEARCH_FUNCTIONS._schema_and_path()
    op.execute(f"""CREATE FUNCTION {NAME}() RETURNS float8
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = {path}
        AS $$
            SELECT common.freq * greatest(c.reltuples, 0)::float8
            FROM pg_stats s
            JOIN pg_class c ON c.oid = format('%I.%I', s.schemaname, s.tablename)::regclass
            CROSS JOIN LATERAL unnest(s.most_common_vals::text::uuid[], s.most_common_freqs) AS common(tenant, freq)
            WHERE s.schemaname = '{schema}' AND s.tablename = 'memories' AND s.attname = 'tenant_id'
              AND common.tenant = {SEARCH_FUNCTIONS.CURRENT_TENANT}
        $$""")
    op.execute(f"REVOKE ALL ON FUNCTION {NAME}() FROM PUBLIC")
    op.execute(f"GRANT EXECUTE ON FUNCTION {NAME}() TO {SEARCH_FUNCTIONS._app_role()}")


def downgrade() -> None:
    op.execute(f"DROP FUNCTION {NAME}()")
