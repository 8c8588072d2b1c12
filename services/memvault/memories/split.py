"""Reads of the system tenant's shared memories on Citus, beside a tenant's own (issue 26).

On one node a list or search reads ``tenant_id IN (tenant, system)`` in one statement. On Citus
the system tenant's rows hash to a shard of their own, maybe on another node: such a statement
spans two shard groups, which Citus refuses for the search's joins and correlated subqueries (and
which would make every read a two-node one). There each tenant statement names the tenant alone
(``db.session.system_apart``: the read conditions leave the system branch out), routed to one
worker, and the system tenant's shared rows are read by the same statement run again as the
system tenant (``db.session.reading_as_system``), routed to its shard, only when it holds any.
The two answers are merged here.

A system memory that a narrower memory of the tenant's shadows (the same type and key, visible
to the same reader) is left out of the merge, as one node's single statement leaves it out
(memories.reads_repository.unshadowed: one more statement on the tenant's shard, only when the
system half has keyed rows). What differs from one node, and only when the system tenant holds shared
memories: a search ranks each half's candidates among themselves before the merge by score, and
a page whose system rows were shadowed may be shorter than its limit (its cursor still leads on).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memvault.db.pagination import encode_cursor
from memvault.memories.models import Memory


def merge_pages(
    mine: Sequence[Memory], shared: Sequence[Memory], limit: int, more: bool
) -> tuple[list[Memory], str | None]:
    """Two pages, each newest first by (created_at, id) from the same cursor, as one page of
    ``limit`` with its cursor. ``more``: whether either page had rows past it."""
    rows = sorted([*mine, *shared], key=lambda m: (m.created_at, m.id), reverse=True)
    page, rest = rows[:limit], rows[limit:]
    if not page or not (rest or more):
        return page, None
    return page, encode_cursor(page[-1].created_at, page[-1].id)


def merge_hits(mine: list[Any], shared: list[Any]) -> list[Any]:
    """Two searches' hits as one list, best score first (the tenant's first on a tie)."""
    return sorted([*mine, *shared], key=lambda h: -h.score)
