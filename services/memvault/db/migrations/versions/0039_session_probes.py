"""A memory's session neighbours read along the session index, however long the session.

The search's context channel and the ``neighbours`` option read, for a memory in a session, the
memories just before and after it in session order (valid time, then insertion order) along
``ix_memories_session`` (migration 0009: tenant, namespace, session, ``coalesce(valid_from,
created_at)``, seq). Under the app role's row-level security a condition that is not LEAKPROOF runs
after the policy, and COALESCE counts as such (as migration 0033 found for inferred
conversations): the place in session order could not be an index condition, so each probe read
its whole session and sorted it for the one it kept. Harmless for sessions of a few dozen turns;
an agent that keeps one session for good (3,000 turns here) made every search read 195,848 rows,
56 probes of the whole session (tests/retrieval/test_plan.py).

These functions run the probe as the table owner, as 0033's do for session-less events: the
nearest ``p_k`` ids of the session on one side, of the tenant set in the transaction only. The
caller reads them through row-level security and its own conditions.

They say how many rows they return (``ROWS``), and so now do 0033's: expecting PostgreSQL's
default of 1,000 from each probe, the planner priced the search's candidates at thousands and
read a small tenant's memories whole for their signals (as migration 0015 found for the candidate
functions).

Revision ID: 0039
Revises: 0038
Create Date: 2026-12-07
"""

from __future__ import annotations

import importlib
from typing import Any

from alembic import op

revision = "0039"
down_revision = "0038"
branch_labels = None
depends_on = None


def _revision(module: str) -> Any:
    return importlib.import_module(f"memvault.db.migrations.versions.{module}")


SEARCH_FUNCTIONS = _revision("0016_search_functions_tenant")
CITUS = _revision("0035_citus_shard_functions")
ARGS = "(uuid, text, timestamptz, bigint, integer)"
ALONE_ARGS = "(uuid, text, text, text, timestamptz, bigint, double precision, integer)"
# The order of magnitude of what a probe returns (its p_k: 3 for the context channel, up to 9
# for `neighbours`, 8 for an inferred conversation).
ROWS = 8
PROBES = (
    ("memvault_session_before", "<", "DESC"),
    ("memvault_session_after", ">", "ASC"),
)


def upgrade() -> None:
    schema, path = SEARCH_FUNCTIONS._schema_and_path()
    for name, cmp, order in PROBES:
        op.execute(f"""CREATE FUNCTION {name}(
                p_namespace uuid, p_session text, p_ord timestamptz, p_seq bigint, p_k integer
            ) RETURNS TABLE (tenant_id uuid, id uuid) ROWS {ROWS}
            LANGUAGE sql STABLE SECURITY DEFINER
            SET search_path = {path}
            AS $$
                SELECT m.tenant_id, m.id FROM {schema}.memories m
                WHERE m.tenant_id = {SEARCH_FUNCTIONS.CURRENT_TENANT} AND m.namespace_id = p_namespace
                  AND m.session_id = p_session AND m.session_id IS NOT NULL
                  AND (coalesce(m.valid_from, m.created_at), m.seq) {cmp} (p_ord, p_seq)
                ORDER BY coalesce(m.valid_from, m.created_at) {order}, m.seq {order}
                LIMIT p_k
            $$""")
        op.execute(f"REVOKE ALL ON FUNCTION {name}{ARGS} FROM PUBLIC")
        op.execute(f"GRANT EXECUTE ON FUNCTION {name}{ARGS} TO {SEARCH_FUNCTIONS._app_role()}")
    for name in ("memvault_alone_before", "memvault_alone_after"):
        op.execute(f"ALTER FUNCTION {name}{ALONE_ARGS} ROWS {ROWS}")
    if CITUS._citus():
        for name, _cmp, _order in PROBES:
            CITUS.shard_local(name)


def downgrade() -> None:
    for name in ("memvault_alone_before", "memvault_alone_after"):
        op.execute(f"ALTER FUNCTION {name}{ALONE_ARGS} ROWS 1000")
    for name, _cmp, _order in PROBES:
        op.execute(f"DROP FUNCTION IF EXISTS {name}{ARGS}")
