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
