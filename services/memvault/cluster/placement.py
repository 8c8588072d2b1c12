"""Tenant placement on Citus: one (large) tenant onto shards of its own, on the node named.

Works on any Citus cluster through the coordinator's owner connection, not only the local one.
Citus does the work: ``isolate_tenant_to_new_shard`` splits the tenant out of its shard group,
``citus_move_shard_placement`` moves the new shards. Both in ``block_writes`` mode: writes to the
shards being copied wait until the copy is done (reads go on), so none fails. The non-blocking
mode (logical replication) stalled here: the split's subscription kept failing on
``usage_hourly`` ("publisher did not send replica identity column expected"), and the call never
returned, so it is not used until that is understood.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import psycopg

from memvault.cluster import repository


class PlacementError(RuntimeError):
    pass


@dataclass(frozen=True)
class Placement:
    tenant_id: str
    shard: int
    host: str
    port: int
    isolated: bool
    moved: bool


def isolate_tenant(conn: psycopg.Connection, tenant: str, to: tuple[str, int] | None = None) -> Placement:
    """Put ``tenant`` (a name or an id) on shards of its own, then, with ``to`` (host, port), on
    that node. Idempotent: an isolated tenant already on ``to`` is left as it is. ``conn``: an
    autocommit owner connection to the coordinator."""
    tenant_id = repository.tenant_id(conn, tenant) if not _is_uuid(tenant) else tenant
    if tenant_id is None:
        raise PlacementError(f"no tenant named {tenant!r}")
    shard = repository.tenant_shard(conn, tenant_id)
    isolated = False
    if not repository.shard_is_isolated(conn, shard):
        shard = repository.isolate(conn, tenant_id)
        isolated = True
    where = repository.placement(conn, shard)
    moved = False
    if to is not None and where != to:
        repository.move(conn, shard, where, to)
        where, moved = to, True
    return Placement(tenant_id, shard, where[0], where[1], isolated, moved)


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
