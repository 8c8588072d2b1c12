"""The cluster's own SQL: extensions and Citus' node list, on a node's owner connection."""

from __future__ import annotations

import psycopg


def install_extensions(conn: psycopg.Connection) -> None:
    """citus and vector, those missing. Looked up first: a worker already in the cluster refuses
    even ``CREATE EXTENSION IF NOT EXISTS`` ("operation is not allowed on this node")."""
    have = {name for (name,) in conn.execute("SELECT extname FROM pg_extension").fetchall()}
    # citus first: it must be the first extension of a database that preloads it.
    for name in ("citus", "vector"):
        if name not in have:
            conn.execute(f"CREATE EXTENSION {name}")


def set_coordinator(conn: psycopg.Connection, host: str, port: int) -> None:
    conn.execute("SELECT citus_set_coordinator_host(%s, %s)", (host, port))


def node_ports(conn: psycopg.Connection) -> set[int]:
    return {int(p) for (p,) in conn.execute("SELECT nodeport FROM pg_dist_node").fetchall()}


def add_node(conn: psycopg.Connection, host: str, port: int) -> None:
    conn.execute("SELECT citus_add_node(%s, %s)", (host, port))


def nodes(conn: psycopg.Connection) -> dict[int, tuple[str, bool]]:
    """Each node's port: its role (primary, secondary) and whether Citus counts it active."""
    rows = conn.execute("SELECT nodeport, noderole::text, isactive FROM pg_dist_node").fetchall()
    return {int(p): (str(role), bool(active)) for p, role, active in rows}


def tenant_id(conn: psycopg.Connection, name: str) -> str | None:
    row = conn.execute("SELECT id::text FROM tenants WHERE name = %s", (name,)).fetchone()
    return None if row is None else str(row[0])


def tenant_shard(conn: psycopg.Connection, tenant: str) -> int:
    """The shard of ``namespaces`` holding ``tenant`` (its co-located shards hold the rest)."""
    row = conn.execute("SELECT get_shard_id_for_distribution_column('namespaces', %s::uuid)", (tenant,)).fetchone()
    assert row is not None
    return int(row[0])


def shard_is_isolated(conn: psycopg.Connection, shard: int) -> bool:
    """Whether ``shard`` covers a single hash value: one tenant (and its hash twins) only."""
    row = conn.execute(
        "SELECT shardminvalue = shardmaxvalue FROM pg_dist_shard WHERE shardid = %s", (shard,)
    ).fetchone()
    return bool(row and row[0])


def isolate(conn: psycopg.Connection, tenant: str) -> int:
    """Split ``tenant`` out of its shard group into shards of its own; the new shard's id."""
    row = conn.execute(
        "SELECT isolate_tenant_to_new_shard('namespaces', %s::uuid, 'CASCADE', shard_transfer_mode => 'block_writes')",
        (tenant,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def placement(conn: psycopg.Connection, shard: int) -> tuple[str, int]:
    row = conn.execute("SELECT nodename, nodeport FROM citus_shards WHERE shardid = %s LIMIT 1", (shard,)).fetchone()
    assert row is not None
    return str(row[0]), int(row[1])


def move(conn: psycopg.Connection, shard: int, source: tuple[str, int], target: tuple[str, int]) -> None:
    """Move ``shard`` and its co-located shards to ``target``."""
    conn.execute(
        "SELECT citus_move_shard_placement(%s, %s, %s, %s, %s, shard_transfer_mode => 'block_writes')",
        (shard, *source, *target),
    )
