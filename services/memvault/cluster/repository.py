"""The cluster's own SQL: extensions and Citus' node list, on a node's owner connection."""

from __future__ import annotations

from typing import Literal

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
    """Split ``tenant`` out of its shard group into shards of its own, in ``block_writes`` mode
    (every child on the source node); the new shard's id."""
    row = conn.execute(
        "SELECT isolate_tenant_to_new_shard('namespaces', %s::uuid, 'CASCADE', shard_transfer_mode => 'block_writes')",
        (tenant,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def shard_range(conn: psycopg.Connection, shard: int) -> tuple[int, int]:
    """The hash range ``shard`` covers (both ends included)."""
    row = conn.execute("SELECT shardminvalue, shardmaxvalue FROM pg_dist_shard WHERE shardid = %s", (shard,)).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def tenant_hash(conn: psycopg.Connection, tenant: str) -> int:
    """The hash Citus places ``tenant`` by (that of the distribution column's type)."""
    row = conn.execute("SELECT worker_hash(%s::uuid)", (tenant,)).fetchone()
    assert row is not None
    return int(row[0])


def node_id(conn: psycopg.Connection, host: str, port: int) -> int | None:
    row = conn.execute(
        "SELECT nodeid FROM pg_dist_node WHERE nodename = %s AND nodeport = %s AND isactive AND noderole = 'primary'",
        (host, port),
    ).fetchone()
    return None if row is None else int(row[0])


def workers(conn: psycopg.Connection) -> list[tuple[str, int]]:
    """The active primary nodes that may hold shards, by port."""
    rows = conn.execute(
        "SELECT nodename, nodeport FROM pg_dist_node"
        " WHERE isactive AND noderole = 'primary' AND shouldhaveshards ORDER BY nodeport"
    ).fetchall()
    return [(str(h), int(p)) for h, p in rows]


def wal_levels(conn: psycopg.Connection) -> dict[tuple[str, int], str]:
    """Each worker's ``wal_level`` (logical transfers need ``logical`` on the source)."""
    rows = conn.execute("SELECT nodename, nodeport, result FROM run_command_on_workers('SHOW wal_level')").fetchall()
    return {(str(h), int(p)): str(r) for h, p, r in rows}


def split(conn: psycopg.Connection, shard: int, points: list[int], nodes: list[int]) -> None:
    """Split ``shard`` and its co-located shards at ``points`` (each the last hash of a child),
    child ``i`` onto node ``nodes[i]``, in logical mode: writes go on during the copy and wait
    only for the final catch-up."""
    conn.execute(
        "SELECT citus_split_shard_by_split_points(%s, %s::text[], %s::int[], shard_transfer_mode => 'force_logical')",
        (shard, [str(p) for p in points], nodes),
    )


def shards_within(conn: psycopg.Connection, low: int, high: int) -> list[int]:
    """The shards of ``namespaces`` inside the hash range [low, high] (one per co-located group)."""
    rows = conn.execute(
        "SELECT shardid FROM pg_dist_shard WHERE logicalrelid = 'namespaces'::regclass"
        " AND shardminvalue::int >= %s AND shardmaxvalue::int <= %s ORDER BY shardminvalue::int",
        (low, high),
    ).fetchall()
    return [int(s) for (s,) in rows]


def placement(conn: psycopg.Connection, shard: int) -> tuple[str, int]:
    row = conn.execute("SELECT nodename, nodeport FROM citus_shards WHERE shardid = %s LIMIT 1", (shard,)).fetchone()
    assert row is not None
    return str(row[0]), int(row[1])


def move(
    conn: psycopg.Connection,
    shard: int,
    source: tuple[str, int],
    target: tuple[str, int],
    mode: Literal["block_writes", "force_logical"],
) -> None:
    """Move ``shard`` and its co-located shards to ``target``; ``mode``: ``block_writes`` or
    ``force_logical``."""
    conn.execute(
        "SELECT citus_move_shard_placement(%s, %s, %s, %s, %s, shard_transfer_mode => %s::citus.shard_transfer_mode)",
        (shard, *source, *target, mode),
    )


def analyse_within(conn: psycopg.Connection, low: int, high: int) -> list[str]:
    """ANALYZE every distributed table's shards inside the hash range [low, high], each on its
    node; what failed, by node (nothing: all analysed). A split or a move makes new shard tables,
    with no statistics until autovacuum gets to them: meanwhile a worker planned a search's read of
    each candidate through the tenant's index instead of its key (0.09 ms a candidate against
    0.002, the search 1.6x slower)."""
    rows = conn.execute(
        "SELECT cs.nodename, cs.nodeport, string_agg(cs.shard_name::text, ', ' ORDER BY cs.shard_name)"
        " FROM citus_shards cs JOIN pg_dist_shard s USING (shardid)"
        " WHERE cs.citus_table_type = 'distributed' AND s.shardminvalue::int >= %s AND s.shardmaxvalue::int <= %s"
        " GROUP BY cs.nodename, cs.nodeport",
        (low, high),
    ).fetchall()
    failed = []
    for host, port, shards in rows:
        (ok, result) = conn.execute(
            "SELECT success, result FROM master_run_on_worker(%s, %s, %s, false)",
            ([host], [port], [f"ANALYZE {shards}"]),
        ).fetchone() or (False, "no answer")
        if not ok:
            failed.append(f"ANALYZE {shards} on {host}:{port} failed: {result}")
    return failed
