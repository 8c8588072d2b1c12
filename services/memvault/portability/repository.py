"""Portability's statements: a namespace's rows read page by page for an export, and restored in
batches for an import. Every read filters by tenant (and namespace, where the table has one); row-
level security is the second lock."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import RowMapping, Table, Text, cast, func, insert, literal, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.contradictions.models import Contradiction
from memvault.entities.models import Entity, MemoryEntity, Relation
from memvault.events.models import ChatSession, Event
from memvault.memories.models import Memory, MemoryHistoryEntry
from memvault.observations.models import Observation
from memvault.traces.models import Trace, TraceStep

TABLES: dict[str, Table] = {
    "entity": Entity.__table__,  # type: ignore[dict-item]
    "relation": Relation.__table__,  # type: ignore[dict-item]
    "session": ChatSession.__table__,  # type: ignore[dict-item]
    "event": Event.__table__,  # type: ignore[dict-item]
    "observation": Observation.__table__,  # type: ignore[dict-item]
    "memory": Memory.__table__,  # type: ignore[dict-item]
    "contradiction": Contradiction.__table__,  # type: ignore[dict-item]
    "trace": Trace.__table__,  # type: ignore[dict-item]
}
# Keyset order per table: stable and, for events, the conversation's own order.
ORDER: dict[str, tuple[str, ...]] = {
    "entity": ("created_at", "id"),
    "relation": ("created_at", "id"),
    "session": ("started_at", "id"),
    "event": ("seq",),
    "observation": ("session_id",),
    "memory": ("recorded_at", "id"),
    "contradiction": ("created_at", "id"),
    "trace": ("started_at", "id"),
}
STEP_COLUMNS = ("seq", "thought", "action", "observation", "tool_name", "tool_args", "tool_result", "at")
HISTORY_COLUMNS = ("action", "actor", "at", "changed_fields", "snapshot")

# Rows per INSERT round trip (one executemany): large enough that an import is a few round trips
# per table, small enough to bound what one statement holds.
CHUNK = 1000

_STEPS: Table = TraceStep.__table__  # type: ignore[assignment]
_HISTORY: Table = MemoryHistoryEntry.__table__  # type: ignore[assignment]
_LINKS: Table = MemoryEntity.__table__  # type: ignore[assignment]
# Every table an import writes.
WRITTEN: tuple[Table, ...] = (*TABLES.values(), _STEPS, _HISTORY, _LINKS)


# ---- export ---------------------------------------------------------------------------------


def _own(kind: str, tenant_id: uuid.UUID, namespace_id: uuid.UUID) -> tuple[Any, ...]:
    """What makes a row of ``kind`` part of the namespace's export. A contradiction is marked in a
    namespace but may name a tenant-scope memory, which the file does not hold: only marks between
    two of the namespace's own memories go out, so every reference of the file points into it."""
    table = TABLES[kind]
    own: tuple[Any, ...] = (table.c.tenant_id == tenant_id, table.c.namespace_id == namespace_id)
    if kind == "contradiction":
        m = Memory.__table__.c
        mine = select(m.id).where(m.tenant_id == tenant_id, m.namespace_id == namespace_id)
        own += (table.c.memory_id.in_(mine), table.c.other_id.in_(mine))
    return own


async def pages(
    s: AsyncSession,
    kind: str,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    columns: Sequence[str],
    *,
    embeddings: bool,
    size: int,
) -> AsyncIterator[Sequence[RowMapping]]:
    """A namespace's rows of one kind, ``size`` at a time in keyset order: ``columns``, the order's
    columns, and (``embeddings``, for a table that has them) each vector as text."""
    table = TABLES[kind]
    order = [table.c[c] for c in ORDER[kind]]
    picked: list[Any] = [table.c[c] for c in dict.fromkeys([*columns, *ORDER[kind]])]
    if embeddings and "embedding" in table.c:
        picked.append(cast(table.c.embedding, Text).label("embedding"))
    first = select(*picked).where(*_own(kind, tenant_id, namespace_id)).order_by(*order).limit(size)
    after: tuple[Any, ...] | None = None
    while True:
        stmt = first if after is None else first.where(tuple_(*order) > tuple_(*after))
        rows = (await s.execute(stmt)).mappings().all()
        if not rows:
            return
        yield rows
        after = tuple(rows[-1][c] for c in ORDER[kind])


def _json_size(columns: Sequence[Any]) -> Any:
    """The bytes of these columns as one compact JSON object, as the export writes it: PostgreSQL's
    ``json_build_object`` puts a space either side of each colon and after each comma, which
    ``json.dumps(separators=(",", ":"))`` does not (3n - 1 bytes for n keys). Nested JSON values keep
    their spaces, so the figure errs a little high."""
    args: list[Any] = []
    for c in columns:
        args += [literal(c.key, Text), c]
    return func.octet_length(cast(func.json_build_object(*args), Text)) - (3 * len(columns) - 1)


async def _summed(s: AsyncSession, value: Any, *where: Any) -> int:
    return int((await s.execute(select(func.coalesce(func.sum(value), 0)).where(*where))).scalar_one())


async def export_size(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    columns: Mapping[str, Sequence[str]],
    *,
    embeddings: bool,
) -> int:
    """What an export of this namespace will weigh, in bytes, summed by the database without
    reading a row into Python: every record's JSON, its ``kind`` and newline, a memory's entity
    links and history, a trace's steps. Header and end record are left out (a few hundred bytes)."""
    # The lists a record carries beside its columns, written empty; each entry adds itself and a comma.
    lists = {"memory": ',"entity_ids":[],"history":[]', "trace": ',"steps":[]'}
    entries: dict[str, list[tuple[Any, Any]]] = {
        "memory": [
            (_json_size([_HISTORY.c[c] for c in HISTORY_COLUMNS]) + 1, _HISTORY.c.memory_id),
            (len('"00000000-0000-0000-0000-000000000000",'), _LINKS.c.memory_id),
        ],
        "trace": [(_json_size([_STEPS.c[c] for c in STEP_COLUMNS]) + 1, _STEPS.c.trace_id)],
    }
    total = 0
    for kind, cols in columns.items():
        table = TABLES[kind]
        picked: list[Any] = [table.c[c] for c in cols]
        if embeddings and "embedding" in table.c:
            picked.append(cast(table.c.embedding, Text).label("embedding"))
        own = _own(kind, tenant_id, namespace_id)
        # The record, and ,"kind":"<kind>" and its newline.
        total += await _summed(s, _json_size(picked) + len(f',"kind":"{kind}"{lists.get(kind, "")}\n'), *own)
        for size, parent in entries.get(kind, []):
            total += await _summed(
                s, size, parent.table.c.tenant_id == tenant_id, parent.in_(select(table.c.id).where(*own))
            )
    return total


async def memory_links(s: AsyncSession, tenant_id: uuid.UUID, memory_ids: Sequence[uuid.UUID]) -> list[tuple[Any, Any]]:
    """(memory id, entity id) for each link of these memories."""
    stmt = select(MemoryEntity.memory_id, MemoryEntity.entity_id).where(
        MemoryEntity.tenant_id == tenant_id, MemoryEntity.memory_id.in_(list(memory_ids))
    )
    return [(m, e) for m, e in (await s.execute(stmt)).all()]


async def memory_history(
    s: AsyncSession, tenant_id: uuid.UUID, memory_ids: Sequence[uuid.UUID]
) -> Sequence[RowMapping]:
    """These memories' history entries, oldest first: ``memory_id`` and ``HISTORY_COLUMNS``."""
    h = _HISTORY.c
    stmt = (
        select(h.memory_id, *(h[c] for c in HISTORY_COLUMNS))
        .where(h.tenant_id == tenant_id, h.memory_id.in_(list(memory_ids)))
        .order_by(h.id)
    )
    return (await s.execute(stmt)).mappings().all()


async def trace_steps(s: AsyncSession, tenant_id: uuid.UUID, trace_ids: Sequence[uuid.UUID]) -> Sequence[RowMapping]:
    """These traces' steps in order: ``trace_id`` and ``STEP_COLUMNS``."""
    t = _STEPS.c
    stmt = (
        select(t.trace_id, *(t[c] for c in STEP_COLUMNS))
        .where(t.tenant_id == tenant_id, t.trace_id.in_(list(trace_ids)))
        .order_by(t.trace_id, t.seq)
    )
    return (await s.execute(stmt)).mappings().all()


# ---- import ---------------------------------------------------------------------------------


def null_when_left_out(table: Table) -> frozenset[str]:
    """The columns a row may leave out that the table declares no default for: NULL either way."""
    return frozenset(
        c.name
        for c in table.c
        if c.nullable and c.server_default is None and c.default is None and c.computed is None and c.identity is None
    )


def _runs(table: Table, rows: Sequence[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """The rows in order, as runs that one executemany can take (every row of a run names the same
    columns). A column a row leaves out that has no default in the table is given as NULL, which is
    what leaving it out means; one that has a default stays out, and starts a new run."""
    nullable = null_when_left_out(table)
    run: list[dict[str, Any]] = []
    names: frozenset[str] = frozenset()
    for row in rows:
        full = {**dict.fromkeys(nullable - row.keys()), **row}
        if run and frozenset(full) != names:
            yield run
            run = []
        names = frozenset(full)
        run.append(full)
    if run:
        yield run


async def _insert(s: AsyncSession, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    for run in _runs(table, rows):
        for start in range(0, len(run), CHUNK):
            await s.execute(insert(table), run[start : start + CHUNK])


async def insert_records(s: AsyncSession, kind: str, rows: Sequence[dict[str, Any]]) -> None:
    """Insert rows of one kind in the order given, in batches. Each row maps column names to
    values, ``tenant_id`` and ``namespace_id`` included."""
    await _insert(s, TABLES[kind], rows)


async def insert_steps(s: AsyncSession, rows: Sequence[dict[str, Any]]) -> None:
    """Trace steps: ``tenant_id``, ``trace_id`` and ``STEP_COLUMNS`` each."""
    await _insert(s, _STEPS, rows)


async def insert_links(s: AsyncSession, rows: Sequence[dict[str, Any]]) -> None:
    """Memory-entity links: ``tenant_id``, ``memory_id``, ``entity_id`` each."""
    await _insert(s, _LINKS, rows)


async def insert_history(s: AsyncSession, rows: Sequence[dict[str, Any]]) -> None:
    """History entries: ``tenant_id``, ``memory_id`` and ``HISTORY_COLUMNS`` each."""
    await _insert(s, _HISTORY, rows)
