"""Citus (issue 26): on a database with the citus extension, the tenant tables are distributed by
``tenant_id``, co-located, and the small global tables become reference tables. On PostgreSQL
without Citus this migration does nothing, so one chain of migrations serves both shapes.

Distributed (``DISTRIBUTED``), co-located with ``namespaces``: every table a memory request reads or
writes. Each tenant's rows of all of them sit in the same shard group on one node, so a statement
filtered by one tenant goes to that node alone, and their foreign keys (all of them carry
``tenant_id``) hold within the node.

Reference tables (``REFERENCE``), a copy on every node: ``tenants`` (every tenant table's foreign
key points at it), ``plans`` (``tenants.plan``'s), and the OAuth clients and signing keys.

Left on the coordinator: the tables of signing in (API keys, OAuth users, codes, grants, refresh
tokens, spent tickets, web sessions, invitations). A request looks them up by a hash or prefix
before it knows its tenant (``memvault_find_api_key`` and its siblings), and each is unique across
tenants: distributed, every such lookup would ask every shard. They are a few rows per tenant. The
status tables (``health_samples``, ``latency_minutes``) are the server's own and stay there too.

Citus will not distribute a table that plain tables reference by foreign key, so those keys are
dropped first and made again, the same, once every table is distributed.

The triggers of ``memories`` that keep ``memory_terms`` (migration 0013) run on each shard of
``memories`` (``citus.enable_unsafe_triggers``), and write only rows of the tenants of that shard,
which live in the co-located shard of ``memory_terms`` on the same node. As written for one node
they fail there: Citus plans their ``INSERT INTO memory_terms SELECT ... FROM added`` as a
distributed statement, sent to a connection where the trigger's transition table does not exist.
On Citus they are replaced by the same statements aimed at the co-located shard by name (found
with ``get_shard_id_for_distribution_column``), which PostgreSQL runs locally. The tenant
must reach the workers for row-level security there: the app sets it with ``SET LOCAL``
(db/session.py), which Citus forwards when ``citus.propagate_set_commands`` is ``local``, set here
for the database.

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None

REFERENCE = ("plans", "tenants", "oauth_clients", "oauth_signing_keys")
# namespaces first: the others are co-located with it.
DISTRIBUTED = (
    "namespaces",
    "memories",
    "memory_terms",
    "memory_history",
    "memory_entities",
    "entities",
    "relations",
    "events",
    "sessions",
    "observations",
    "jobs",
    "contradictions",
    "traces",
    "trace_steps",
    "audit_log",
    "idempotency_keys",
    "usage_hourly",
    "webhook_endpoints",
    "webhook_deliveries",
)


def _citus() -> bool:
    bind = op.get_bind()
    return bool(bind.exec_driver_sql("SELECT count(*) FROM pg_extension WHERE extname = 'citus'").scalar_one())


def _foreign_keys_between_distributed() -> list[tuple[str, str, str]]:
    """(table, constraint, definition) of each foreign key from or to a table to distribute,
    except those to a reference table (Citus keeps those as they are)."""
    rows = op.get_bind().exec_driver_sql(
        """
        SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid)
        FROM pg_constraint c
        WHERE c.contype = 'f'
          AND c.conrelid::regclass::text = ANY (%(tables)s) AND c.confrelid::regclass::text = ANY (%(tables)s)
        ORDER BY 1, 2
        """,
        {"tables": list(DISTRIBUTED)},
    )
    return [(t, n, d) for t, n, d in rows]


SYSTEM_TENANT = "'00000000-0000-0000-0000-000000000000'::uuid"
# memory_terms.owner_key and the rows it holds, as in migrations 0013 and 0018.
KEY = f"""CASE
    WHEN {{m}}.scope = 'system' AND {{m}}.tenant_id = {SYSTEM_TENANT} THEN {{m}}.tenant_id
    WHEN {{m}}.namespace_id IS NOT NULL THEN {{m}}.namespace_id
    WHEN {{m}}.scope = 'tenant' THEN {{m}}.tenant_id
END"""
LIVE = "({m}.superseded_at IS NULL AND {m}.state IN ('tentative', 'stable'))"
SHARD = "shard_name('memory_terms'::regclass, get_shard_id_for_distribution_column('memory_terms', {tenant}))"


def _postings(rows: str) -> str:
    key = KEY.format(m="m")
    return f"""SELECT m.tenant_id, {key}, w.lexeme, m.id, length(m.tsv)
        FROM {rows} m, unnest(tsvector_to_array(m.tsv)) AS w(lexeme)
        WHERE {LIVE.format(m="m")} AND {key} IS NOT NULL"""


def _shard_triggers(schema: str) -> None:
    """The word index's trigger functions, writing to the co-located shard of ``memory_terms``."""
    header = f"LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {schema}"
    op.execute(
        f"""
        CREATE OR REPLACE FUNCTION memvault_terms_added() RETURNS trigger {header} AS $$
        DECLARE target text;
        BEGIN
            SELECT {SHARD.format(tenant="tenant_id")} INTO target FROM added LIMIT 1;
            IF target IS NOT NULL THEN
                EXECUTE format($q$INSERT INTO %s {_postings("added")} ON CONFLICT DO NOTHING$q$, target);
            END IF;
            RETURN NULL;
        END $$;
        """
    )
    op.execute(
        f"""
        CREATE OR REPLACE FUNCTION memvault_terms_removed() RETURNS trigger {header} AS $$
        DECLARE target text;
        BEGIN
            SELECT {SHARD.format(tenant="tenant_id")} INTO target FROM removed LIMIT 1;
            IF target IS NOT NULL THEN
                EXECUTE format($q$DELETE FROM %s t
                    USING ({_postings("removed")}) AS gone(tenant_id, owner_key, lexeme, memory_id, doc_len)
                    WHERE t.tenant_id = gone.tenant_id AND t.owner_key = gone.owner_key
                      AND t.lexeme = gone.lexeme AND t.memory_id = gone.memory_id$q$, target);
            END IF;
            RETURN NULL;
        END $$;
        """
    )
    old_key, new_key = KEY.format(m="OLD"), KEY.format(m="NEW")
    op.execute(
        f"""
        CREATE OR REPLACE FUNCTION memvault_terms_changed() RETURNS trigger {header} AS $$
        BEGIN
            IF {LIVE.format(m="OLD")} AND ({old_key}) IS NOT NULL THEN
                EXECUTE format($q$DELETE FROM %s WHERE tenant_id = $1 AND owner_key = $2
                    AND lexeme = ANY (tsvector_to_array($3)) AND memory_id = $4$q$,
                    {SHARD.format(tenant="OLD.tenant_id")})
                USING OLD.tenant_id, ({old_key}), OLD.tsv, OLD.id;
            END IF;
            IF {LIVE.format(m="NEW")} AND ({new_key}) IS NOT NULL THEN
                EXECUTE format($q$INSERT INTO %s SELECT $1, $2, w.lexeme, $3, length($4)
                    FROM unnest(tsvector_to_array($4)) AS w(lexeme) ON CONFLICT DO NOTHING$q$,
                    {SHARD.format(tenant="NEW.tenant_id")})
                USING NEW.tenant_id, ({new_key}), NEW.id, NEW.tsv;
            END IF;
            RETURN NULL;
        END $$;
        """
    )


def upgrade() -> None:
    if not _citus():
        return
    bind = op.get_bind()
    database = bind.exec_driver_sql("SELECT quote_ident(current_database())").scalar_one()
    op.execute(f"ALTER DATABASE {database} SET citus.propagate_set_commands = 'local'")
    op.execute(f"ALTER DATABASE {database} SET citus.enable_unsafe_triggers = on")
    # This transaction both creates shards and then references them; in parallel mode Citus
    # would refuse the later steps on connections it has already used.
    op.execute("SET LOCAL citus.multi_shard_modify_mode = 'sequential'")
    op.execute("SET LOCAL citus.enable_unsafe_triggers = on")
    keys = _foreign_keys_between_distributed()
    for table, name, _ in keys:
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
    for table in REFERENCE:
        op.execute(f"SELECT create_reference_table('{table}')")
    op.execute(f"SELECT create_distributed_table('{DISTRIBUTED[0]}', 'tenant_id')")
    for table in DISTRIBUTED[1:]:
        op.execute(f"SELECT create_distributed_table('{table}', 'tenant_id', colocate_with => '{DISTRIBUTED[0]}')")
    for table, name, definition in keys:
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")
    _shard_triggers(bind.exec_driver_sql("SELECT current_schema()").scalar_one())


def downgrade() -> None:
    """Nothing on one node. On Citus, refused: undistribute_table cannot take back the tables
    with an identity column (``seq``), so distributed tables stay distributed; undo it from a
    backup taken before the upgrade."""
    if _citus():
        raise RuntimeError("migration 0032 cannot be undone on Citus; restore the backup taken before it")
