"""Tenant placement on Citus: one (large) tenant onto shards of its own, on the node named.

Works on any Citus cluster through the coordinator's owner connection, not only the local one.
Citus does the work, in one of two modes:

- ``logical`` (the default): Citus' non-blocking transfers (logical replication). The tenant's
  writes, and those of the tenants sharing its shard, go on while the rows are copied; they wait
  only for each transfer's final catch-up (under a second here, against several seconds for a
  copy of 8,000 memories in ``block_writes``). Needs ``wal_level = logical`` on the workers.
- ``block_writes``: writes to the shards being copied wait until the copy (and the new shards'
  indexes) are done; reads go on. For clusters without logical WAL.

Why the logical split never leaves a child shard on the source node: Citus' split replicates
through a decoder on the source node that sends each change as a change to the child shard's
table there (a real child when the child stays on that node, else a "dummy" one made for the
purpose). The dummies get their primary keys before the replication slot is made, the real
children only after it; an UPDATE or DELETE made in between is decoded against a child without a
replica identity, the subscriber refuses it ("publisher did not send replica identity column
expected by the logical replication target relation"), and retries it from the same place
forever: the split never returns. ``isolate_tenant_to_new_shard`` keeps every child on the
source node, so any UPDATE in that window stalls it (the metering flush's upsert into
``usage_hourly`` every few seconds is one). Here every child goes to another node, and those
that belong on the source node come back by a logical move, which has no such window (its
changes are decoded against the source shard, which has its key).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal, get_args

import psycopg

from memvault.cluster import repository

Mode = Literal["logical", "block_writes"]
MODES: tuple[Mode, ...] = get_args(Mode)


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
    # What went wrong after the tenant was in place (its new shards not analysed): the move stands.
    warnings: tuple[str, ...] = ()


def isolate_tenant(
    conn: psycopg.Connection, tenant: str, to: tuple[str, int] | None = None, *, mode: Mode = "logical"
) -> Placement:
    """Put ``tenant`` (a name or an id) on shards of its own, then, with ``to`` (host, port), on
    that node. Without ``to`` the logical mode leaves it on another worker than its own (its split
    cannot keep it on the source node: the module's note), ``block_writes`` where it was.
    Idempotent: an isolated tenant already on ``to`` is left as it is. ``conn``: an autocommit
    owner connection to the coordinator."""
    if mode not in MODES:
        raise PlacementError(f"unknown mode {mode!r}: one of {', '.join(MODES)}")
    tenant_id = repository.tenant_id(conn, tenant) if not _is_uuid(tenant) else tenant
    if tenant_id is None:
        raise PlacementError(f"no tenant named {tenant!r}")
    if to is not None and repository.node_id(conn, *to) is None:
        raise PlacementError(f"{to[0]}:{to[1]} is not an active worker of this cluster")
    shard = repository.tenant_shard(conn, tenant_id)
    where = before = repository.placement(conn, shard)
    span = repository.shard_range(conn, shard)  # the tenant's and its neighbours' new shards end up within it
    already = repository.shard_is_isolated(conn, shard)
    if mode == "logical" and (not already or (to is not None and where != to)):
        _require_logical_wal(conn)
    if not already:
        if mode == "logical":
            shard, where = _split_logical(conn, tenant_id, shard, where, to or where)
        else:
            shard = repository.isolate(conn, tenant_id)
    if to is not None and where != to:
        repository.move(conn, shard, where, to, "force_logical" if mode == "logical" else "block_writes")
        where = to
    warnings = repository.analyse_within(conn, *span) if not already or where != before else []
    return Placement(
        tenant_id, shard, where[0], where[1], isolated=not already, moved=where != before, warnings=tuple(warnings)
    )


def _split_logical(
    conn: psycopg.Connection, tenant_id: str, shard: int, source: tuple[str, int], target: tuple[str, int]
) -> tuple[int, tuple[str, int]]:
    """Split ``tenant_id`` out of ``shard`` (on ``source``) with every child on a node other than
    the source (``target``, or another worker when the target is the source: see the module's
    note), then move the other tenants' children back to the source. The tenant's new shard and
    where it is now."""
    via = target if target != source else next((w for w in repository.workers(conn) if w != source), None)
    if via is None:
        raise PlacementError("a logical split needs a second worker; use --mode block_writes")
    via_id = repository.node_id(conn, *via)
    assert via_id is not None
    low, high = repository.shard_range(conn, shard)
    h = repository.tenant_hash(conn, tenant_id)
    # Each point is the last hash of a child: [low, h-1], [h, h], [h+1, high], as Citus' own
    # isolate_tenant_to_new_shard cuts them, less the empty ends.
    points = [p for p in (h - 1, h) if low <= p < high]
    repository.split(conn, shard, points, [via_id] * (len(points) + 1))
    new = repository.tenant_shard(conn, tenant_id)
    for other in repository.shards_within(conn, low, high):
        if other != new:
            repository.move(conn, other, via, source, "force_logical")
    return new, via


def _require_logical_wal(conn: psycopg.Connection) -> None:
    wrong = [f"{h}:{p} ({level})" for (h, p), level in repository.wal_levels(conn).items() if level != "logical"]
    if wrong:
        raise PlacementError(
            "a logical move needs wal_level = logical on every worker, not on "
            + ", ".join(wrong)
            + "; set it and restart them, or use --mode block_writes"
        )


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
