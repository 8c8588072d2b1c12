"""Citus (issue 26): the search's SQL functions read their tenant's shard, so that a search runs
on one worker. On PostgreSQL without Citus this migration does nothing.

A tenant's search statement is routed whole to the worker holding the tenant's shards (all of
its tables' rows are co-located there): a router query, one task. The functions it calls
(``memvault_nearest_keyed``, the word index's, the inferred-session probes, the model probe)
read ``memories`` and ``memory_terms`` by their distributed names, which on the worker would be
a second distributed query inside the task, refused by Citus ("cannot execute a distributed query
from a query on a shard"; allowing it would let a function reach other nodes from inside a shard's
query). Their Citus versions run the same SQL on the shard tables of the tenant by name, found
with ``get_shard_id_for_distribution_column``, which the task's node holds. Called where the
shard is not local (a statement naming no distributed table, run on the coordinator), they read
the distributed tables with the tenant written in, which Citus routes to that one shard.

A tenant's shards hold its rows, not the system tenant's shared memories, which hash to a shard
of their own: on Citus a read takes the system tenant's rows in a statement of its own, made with
``app.tenant_id`` set to the system tenant (memories/split.py). So each function here reads one
half: its tenant's branches when the transaction's tenant is a tenant, the system branch when it
is the system tenant; on one node the functions read both at once, as before.

The versions are made from the functions' current definitions (``pg_proc``): the body's
``public.memories`` and ``public.memory_terms``, the tenant setting, the system tenant's id and
the parameters by name are replaced, and the body runs through ``EXECUTE``. A later migration
that redefines one of these functions must call ``shard_local`` again on Citus.

Revision ID: 0035
Revises: 0033
Create Date: 2026-12-05
"""

from __future__ import annotations

import re

from alembic import op

revision = "0035"
down_revision = "0033"
branch_labels = None
depends_on = None

FUNCTIONS = (
    "memvault_nearest_keyed",
    "memvault_word_best_keyed",
    "memvault_word_matches_keyed",
    "memvault_word_top_keyed",
    "memvault_word_match",
    "memvault_word_scores",
    "memvault_word_counts",
    "memvault_alone_after",
    "memvault_alone_before",
    "memvault_has_other_model",
)
SYSTEM = "00000000-0000-0000-0000-000000000000"
CURRENT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"
TABLES = ("memories", "memory_terms")


def _citus() -> bool:
    bind = op.get_bind()
    return bool(bind.exec_driver_sql("SELECT count(*) FROM pg_extension WHERE extname = 'citus'").scalar_one())


def dynamic_body(body: str, args: list[str]) -> str:
    """``body`` as a ``format()`` string: ``%1$s`` / ``%2$s`` the tables (memories,
    memory_terms), ``%3$L`` the tenant, ``%4$L`` the system tenant (each NULL when the half read
    is the other one), ``$n`` the n-th argument."""
    out = body.replace("%", "%%")
    out = out.replace(CURRENT, "%3$L::uuid").replace(f"'{SYSTEM}'::uuid", "%4$L::uuid")
    for i, table in enumerate(TABLES, start=1):
        out = re.sub(rf"\bpublic\.{table}\b", f"%{i}$s", out)
    for i, name in enumerate(args, start=1):
        out = re.sub(rf"\b{name}\b", f"${i}", out)
    if "current_setting" in out or "public." in out:
        raise RuntimeError(f"cannot make a shard-local version of: {body}")
    return out


def _shard(table: str) -> str:
    return f"shard_name('public.{table}'::regclass, get_shard_id_for_distribution_column('public.{table}', v_home))"


def _setting(entry: str) -> str:
    """A ``proconfig`` entry (``name=value``) as a function's SET clause; a search_path is a list."""
    name, value = entry.split("=", 1)
    return f" SET {name} = {value}" if name == "search_path" else f" SET {name} = '{value}'"


def shard_local(name: str) -> None:
    """Replace function ``name`` by its shard-local version (see the module's docstring)."""
    bind = op.get_bind()
    row = bind.exec_driver_sql(
        """
        SELECT prosrc, coalesce(proargnames, '{}'), pronargs, pg_get_function_arguments(p.oid),
               pg_get_function_result(p.oid), proretset, prosecdef, provolatile, prorows,
               coalesce(proconfig, '{}')
        FROM pg_proc p WHERE p.oid = %(name)s::regproc
        """,
        {"name": f"public.{name}"},
    ).one()
    body, argnames, nargs, arguments, result, returns_set, definer, volatile, rows, config = row
    params = list(argnames[:nargs])
    text = dynamic_body(body.strip().rstrip(";"), params)
    using = f" USING {', '.join(params)}" if params else ""
    call = (
        f"format($body${text}$body$, v_memories, v_terms, v_tenant, v_system)"
        # A function's argument of the same name as a column of RETURNS TABLE is not a concern:
        # the statement is run by EXECUTE, where PL/pgSQL's variables are not seen.
    )
    if returns_set:
        run = f"RETURN QUERY EXECUTE {call}{using};"
        declare_result = ""
    else:
        run = f"EXECUTE {call} INTO v_result{using};\n            RETURN v_result;"
        declare_result = f"v_result {result};"
    settings = "\n".join(_setting(c) for c in config)
    volatility = {"s": "STABLE", "i": "IMMUTABLE", "v": "VOLATILE"}[volatile]
    op.execute(
        f"""
        CREATE OR REPLACE FUNCTION public.{name}({arguments}) RETURNS {result}
        LANGUAGE plpgsql {volatility} {"SECURITY DEFINER" if definer else ""}
        {f"ROWS {int(rows)}" if returns_set else ""}
        {settings}
        AS $fn$
        DECLARE
            v_current uuid := NULLIF(current_setting('app.tenant_id', true), '')::uuid;
            v_tenant uuid := CASE WHEN v_current <> '{SYSTEM}'::uuid THEN v_current END;
            v_system uuid := CASE WHEN v_current = '{SYSTEM}'::uuid THEN v_current END;
            v_home uuid := v_current;
            v_memories text := 'public.memories';
            v_terms text := 'public.memory_terms';
            {declare_result}
        BEGIN
            IF v_home IS NOT NULL AND to_regclass({_shard("memories")}) IS NOT NULL THEN
                -- In the tenant's task, on its node: its shards, by name.
                v_memories := {_shard("memories")};
                v_terms := {_shard("memory_terms")};
            END IF;
            {run}
        END $fn$
        """
    )


def upgrade() -> None:
    if not _citus():
        return
    for name in FUNCTIONS:
        shard_local(name)


def downgrade() -> None:
    """On Citus, back to the one-node versions would mean running their migrations' SQL again:
    refused, as 0032 is (restore the backup taken before it)."""
    if _citus():
        raise RuntimeError("migration 0035 cannot be undone on Citus; restore the backup taken before 0032")
