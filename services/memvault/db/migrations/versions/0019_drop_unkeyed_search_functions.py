"""Drop the search's candidate functions that return ids without their tenant.

Migration 0016 added memvault_word_best_keyed, memvault_word_top_keyed and
memvault_nearest_keyed, and kept memvault_word_best, memvault_word_top and memvault_nearest for
the replicas of the release before it, which called them until they were replaced. No release
since calls them; two of them run as the table owner (SECURITY DEFINER), so they go rather than
stay as unused ways past row-level security.

The downgrade makes them again from 0016's keyed bodies with the tenant column taken out, which
is what they were (tests/db/test_word_index.py compares their definitions with the ones 0015
left).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def _keyed() -> ModuleType:
    """Migration 0016, whose bodies these were: one definition, not a copy that could drift."""
    path = Path(__file__).with_name("0016_search_functions_tenant.py")
    spec = importlib.util.spec_from_file_location("memvault_migration_0016", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upgrade() -> None:
    keyed = _keyed()
    for signature in (keyed.WORD_BEST, keyed.WORD_TOP, keyed.NEAREST):
        op.execute(f"DROP FUNCTION IF EXISTS {signature}")


def downgrade() -> None:
    keyed = _keyed()
    role = keyed._app_role()
    schema, path = keyed._schema_and_path()
    for signature, (parameters, columns, body, rows) in keyed._functions(schema, path).items():
        # The keyed body returns the row's tenant first; the old one returned the rest.
        assert columns.startswith("tenant_id uuid, ") and body.count("SELECT m.tenant_id, m.id, ") == 1, signature
        name = signature.split("(")[0]
        old_body = body.replace("SELECT m.tenant_id, m.id, ", "SELECT m.id, ")
        old_columns = columns.removeprefix("tenant_id uuid, ")
        op.execute(f"CREATE FUNCTION {name}({parameters}) RETURNS TABLE ({old_columns}) ROWS {rows} {old_body}")
        op.execute(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC")
        op.execute(f"GRANT EXECUTE ON FUNCTION {signature} TO {role}")
