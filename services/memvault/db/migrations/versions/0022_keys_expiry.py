"""API keys: expiry and rotation (issue 23).

- `expires_at`: optional; past it the key is refused (401 `api_key_expired`).
- Rotation gives a key a new secret and keeps the old one for a grace period: the old secret's
  prefix and hash move to `previous_prefix` / `previous_secret_hash`, valid until
  `previous_expires_at`. A key thus has at most two live secrets, and one row keeps its identity
  (id, name, scopes, namespaces) across rotations.
- `memvault_find_api_key` finds a key by either prefix and returns the hash of the secret that
  prefix belongs to, with that secret's own end (`secret_expires_at`, null for the current one).
  The return type changes, so the function is dropped and made again, with the same grants.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import context, op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

_OLD_COLUMNS = """id uuid, tenant_id uuid, secret_hash text, name text, scopes text[],
                       namespaces text[], default_namespace text, revoked_at timestamptz,
                       last_used_at timestamptz"""
_SHARED = "k.id, k.tenant_id, {hash}, k.name, k.scopes, k.namespaces, k.default_namespace, k.revoked_at, k.last_used_at"


def _app_role() -> str:
    role = context.config.get_main_option("memvault.app_role") or "memvault_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"unsafe role name {role!r}")
    return role


def _function(schema: str, returns: str, body: str) -> str:
    role = _app_role()
    return f"""
        DROP FUNCTION IF EXISTS memvault_find_api_key(text);
        CREATE FUNCTION memvault_find_api_key(p_prefix text)
        RETURNS TABLE ({returns})
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, {schema}
        AS $$ {body} $$;
        REVOKE ALL ON FUNCTION memvault_find_api_key(text) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION memvault_find_api_key(text) TO {role};
        """


def upgrade() -> None:
    schema = op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one()
    op.execute(
        """
        ALTER TABLE api_keys
            ADD COLUMN expires_at timestamptz,
            ADD COLUMN rotated_at timestamptz,
            ADD COLUMN previous_prefix text,
            ADD COLUMN previous_secret_hash text,
            ADD COLUMN previous_expires_at timestamptz,
            ADD CONSTRAINT uq_api_keys_previous_prefix UNIQUE (previous_prefix),
            ADD CONSTRAINT ck_api_keys_previous_secret CHECK (
                (previous_prefix IS NULL) = (previous_secret_hash IS NULL)
                AND (previous_prefix IS NULL) = (previous_expires_at IS NULL)
            )
        """
    )
    # Two indexed lookups (the unique constraints): either prefix finds the row, never a pattern.
    body = f"""
            SELECT {_SHARED.format(hash="k.secret_hash")}, k.expires_at, NULL::timestamptz
            FROM {schema}.api_keys k WHERE k.prefix = p_prefix
            UNION ALL
            SELECT {_SHARED.format(hash="k.previous_secret_hash")}, k.expires_at, k.previous_expires_at
            FROM {schema}.api_keys k WHERE k.previous_prefix = p_prefix
        """
    returns = f"{_OLD_COLUMNS}, expires_at timestamptz, secret_expires_at timestamptz"
    op.execute(_function(schema, returns, body))


def downgrade() -> None:
    schema = op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one()
    body = f"SELECT {_SHARED.format(hash='k.secret_hash')} FROM {schema}.api_keys k WHERE k.prefix = p_prefix"
    op.execute(_function(schema, _OLD_COLUMNS, body))
    op.execute(
        """
        ALTER TABLE api_keys
            DROP COLUMN previous_expires_at,
            DROP COLUMN previous_secret_hash,
            DROP COLUMN previous_prefix,
            DROP COLUMN rotated_at,
            DROP COLUMN expires_at
        """
    )
