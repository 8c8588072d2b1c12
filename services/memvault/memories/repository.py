from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeVar

from sqlalchemy import (
    ARRAY,
    BindParameter,
    ColumnElement,
    DateTime,
    Integer,
    and_,
    bindparam,
    case,
    delete,
    exists,
    func,
    insert,
    or_,
    select,
    text,
    true,
    tuple_,
    update,
)
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from memvault.db.pagination import newest_first_of
from memvault.db.session import reading_as_system, system_apart
from memvault.entities.models import MemoryEntity
from memvault.memories import split
from memvault.memories.models import Memory, MemoryHistoryEntry
from memvault.memories.schemas import SCOPE_RANK, MemoryFilters, MemoryState
from memvault.principal import SYSTEM_TENANT_ID

# A row a read returns: a memory, or a search's hit of one (unshadowed).
T = TypeVar("T")


def _rank(m: Any) -> ColumnElement[int]:
    return case({level: rank for level, rank in SCOPE_RANK.items()}, value=m.scope)


def scope_conditions(
    tenant_id: uuid.UUID, namespace_id: uuid.UUID | None, reader: str | None = None
) -> list[ColumnElement[bool]]:
    """Rows of this tenant reached by id through this namespace: its own, and the tenant's (or, in
    the system tenant, the system's) shared ones, which belong to no namespace. With a ``reader``
    (a signed-in user, Principal.user_id) another user's rows are not there at all."""
    conds = [
        Memory.tenant_id == tenant_id,
        or_(
            Memory.namespace_id == namespace_id,
            and_(Memory.namespace_id.is_(None), Memory.scope.in_(["tenant", "system"])),
        ),
    ]
    if reader is not None:
        conds.append(readable_by(reader))
    return conds


def readable_by(reader: str) -> ColumnElement[bool]:
    """Rows a signed-in user may see (Principal.reader): all but other users' own memories."""
    return or_(Memory.scope.not_in(["user", "session"]), Memory.user_id.is_(None), Memory.user_id == reader)


@dataclass(frozen=True)
class _Terms:
    """What the read conditions compare with: plain values (for one statement), or bound
    parameters (for a statement kept and run again with other values). None: filter not set."""

    tenant_id: Any
    namespace_id: Any
    states: Any
    user_id: Any = None
    session_id: Any = None
    knowledge_at: Any = None
    valid_at: Any = None
    types: Any = None
    agent_id: Any = None
    scopes: Any = None
    metadata: Any = None
    since: Any = None
    until: Any = None
    entity_id: Any = None
    # The system tenant, whose system-scope rows every reader sees; None on Citus, where they
    # are read by a statement of their own (db.session.system_apart).
    system_tenant: Any = None


def live_read(f: MemoryFilters | None) -> bool:
    """Whether a read sees live memories only: no ``knowledge_at``, no state filter, archived
    left out (the word index holds exactly those, migration 0013)."""
    f = f or MemoryFilters()
    return f.knowledge_at is None and not f.state and not f.include_archived


def _states(f: MemoryFilters) -> list[str]:
    if f.state:
        return [s.value for s in f.state]
    states = [MemoryState.tentative.value, MemoryState.stable.value]
    return [*states, MemoryState.archived.value] if f.include_archived else states


def _values(tenant_id: uuid.UUID, namespace_id: uuid.UUID, f: MemoryFilters) -> dict[str, Any]:
    """Every term's value, by name; the unset filters' are None."""
    return {
        "tenant_id": tenant_id,
        "namespace_id": namespace_id,
        "states": _states(f),
        "user_id": f.user_id,
        "session_id": f.session_id,
        "knowledge_at": f.knowledge_at,
        "valid_at": f.valid_at,
        "types": [t.value for t in f.type] if f.type else None,
        "agent_id": f.agent_id,
        "scopes": [s.value for s in f.scopes] if f.scopes else None,
        "metadata": f.metadata or None,
        "since": f.since,
        "until": f.until,
        "entity_id": f.entity_id,
        "system_tenant": None if system_apart() else SYSTEM_TENANT_ID,
    }


def _levels(m: Any, t: _Terms, *, strict: bool) -> list[Any]:
    """The levels of the scope chain a read walks: the namespace's rows, the tenant's and the
    system's (each a condition; a row is in the chain when it meets one).

    Reading for a user U and/or session S sees U's user-scope rows and S's session-scope rows
    beside the shared ones, and no other user's or session's. Without U and S (browsing the
    namespace) every row of the namespace is visible, but ``strict`` (used to decide which row
    shadows which) counts only the shared levels: one user's override never hides a default from
    another reader.
    """
    if t.user_id is None and t.session_id is None and not strict:
        in_namespace: Any = true()
    else:
        levels: list[Any] = [m.scope == "namespace"]
        if t.user_id is not None:
            levels.append(and_(m.scope == "user", m.user_id == t.user_id))
        if t.session_id is not None:
            session = and_(m.scope == "session", m.session_id == t.session_id)
            if t.user_id is not None:
                # A session's memories stored for another user stay theirs (acting.py).
                session = and_(session, or_(m.user_id.is_(None), m.user_id == t.user_id))
            levels.append(session)
        in_namespace = or_(*levels)
    levels = [
        and_(m.tenant_id == t.tenant_id, m.namespace_id == t.namespace_id, in_namespace),
        and_(m.tenant_id == t.tenant_id, m.namespace_id.is_(None), m.scope == "tenant"),
    ]
    if t.system_tenant is not None:
        levels.append(and_(m.tenant_id == t.system_tenant, m.scope == "system"))
    return levels


def _chain(m: Any, t: _Terms, *, strict: bool) -> Any:
    return or_(*_levels(m, t, strict=strict))


def _time(m: Any, t: _Terms) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = []
    if t.knowledge_at is None:
        conds.append(m.superseded_at.is_(None))
    else:
        conds += [m.recorded_at <= t.knowledge_at, or_(m.superseded_at.is_(None), m.superseded_at > t.knowledge_at)]
    if t.valid_at is not None:
        conds += [
            or_(m.valid_from.is_(None), m.valid_from <= t.valid_at),
            or_(m.valid_to.is_(None), m.valid_to > t.valid_at),
        ]
    return conds


def date_of(m: Any) -> Any:
    """A memory's date: its ``valid_from``, else when it was stored. Date ranges, recency, time
    cues and session order all go by it (and the session index, migration 0009, holds it)."""
    return func.coalesce(m.valid_from, m.created_at)


def _fields(t: _Terms) -> list[ColumnElement[bool]]:
    """Field filters shared by list and search (owner fields act through the scope chain)."""
    conds: list[ColumnElement[bool]] = [Memory.state.in_(t.states)]
    if t.types is not None:
        conds.append(Memory.type.in_(t.types))
    if t.agent_id is not None:
        conds.append(Memory.agent_id == t.agent_id)
    if t.scopes is not None:
        conds.append(Memory.scope.in_(t.scopes))
    if t.metadata is not None:
        conds.append(Memory.metadata_.contains(t.metadata))
    # A date range picks among the memories a reader sees; it does not change which of two with
    # the same key that reader sees (the shadowing test below leaves it out).
    if t.since is not None:
        conds.append(date_of(Memory) >= t.since)
    if t.until is not None:
        conds.append(date_of(Memory) < t.until)
    if t.entity_id is not None:
        conds.append(
            exists().where(
                MemoryEntity.tenant_id == Memory.tenant_id,
                MemoryEntity.memory_id == Memory.id,
                MemoryEntity.entity_id == t.entity_id,
            )
        )
    return conds


def _conditions(t: _Terms) -> tuple[Any, ...]:
    return (_chain(Memory, t, strict=False), *_rest(t))


def _rest(t: _Terms) -> tuple[Any, ...]:
    """The read conditions but the scope chain: time, lifecycle, filters, narrowest-scope-wins."""
    narrower = aliased(Memory)
    shadowed = exists().where(
        narrower.key == Memory.key,
        narrower.type == Memory.type,
        _rank(narrower) < _rank(Memory),
        *_may_shadow(narrower, t),
    )
    return (*_time(Memory, t), *_fields(t), or_(Memory.key.is_(None), ~shadowed))


def _may_shadow(m: Any, t: _Terms) -> list[Any]:
    """What makes ``m`` hide a broader memory of its type and key from this reader: a state the
    read shows, in the reader's own chain (shared levels only), current at the read's time."""
    return [m.state.in_(t.states), _chain(m, t, strict=True), *_time(m, t)]


def read_conditions(tenant_id: uuid.UUID, namespace_id: uuid.UUID, f: MemoryFilters | None) -> list[Any]:
    """Everything a list or search applies inside SQL: the scope chain, time, lifecycle, filters,
    and narrowest-scope-wins for memories that share type and key."""
    # Building these costs a few milliseconds of Python per search, and they depend on nothing
    # but the arguments (SQL expressions are immutable, so statements can share them).
    return list(_read_conditions(tenant_id, namespace_id, (f or MemoryFilters()).model_dump_json(), system_apart()))


@lru_cache(maxsize=1024)
def _read_conditions(tenant_id: uuid.UUID, namespace_id: uuid.UUID, filters_json: str, apart: bool) -> tuple[Any, ...]:
    # ``apart`` (the context's system_apart(), which _values reads) is part of the key.
    return _conditions(_Terms(**_values(tenant_id, namespace_id, MemoryFilters.model_validate_json(filters_json))))


def filter_form(f: MemoryFilters | None) -> tuple[str, ...]:
    """Which filters a read sets: all that decides the SQL of its bound read conditions."""
    values = _values(SYSTEM_TENANT_ID, SYSTEM_TENANT_ID, f or MemoryFilters())
    return tuple(name for name, value in values.items() if value is not None)


def read_branches(tenant_id: uuid.UUID, namespace_id: uuid.UUID, f: MemoryFilters | None) -> list[tuple[Any, ...]]:
    """``read_conditions`` cut along the scope chain: one set of conditions per level (the
    namespace's rows, the tenant's shared rows, the system's), whose rows together are the read's.
    A list runs each as a statement of its own, newest first along its index, and merges them
    (``page``): one statement with the chain's OR can follow no index in that order, and sorted
    every row of the namespace to return the newest fifty (a sequential scan of 100,000 rows)."""
    return list(_read_branches(tenant_id, namespace_id, (f or MemoryFilters()).model_dump_json(), system_apart()))


@lru_cache(maxsize=1024)
def _read_branches(
    tenant_id: uuid.UUID, namespace_id: uuid.UUID, filters_json: str, apart: bool
) -> tuple[tuple[Any, ...], ...]:
    t = _Terms(**_values(tenant_id, namespace_id, MemoryFilters.model_validate_json(filters_json)))
    rest = _rest(t)
    return tuple((level, *rest) for level in _levels(Memory, t, strict=False))


@lru_cache(maxsize=256)
def bound_read_conditions(form: tuple[str, ...]) -> tuple[Any, ...]:
    """``read_conditions`` with every value a bound parameter named ``read_<term>`` (see
    ``read_parameters``): one set of conditions, and the statements built on them, serves every
    tenant, namespace and filter value of the same ``filter_form``."""
    bound: dict[str, BindParameter[Any]] = {
        name: bindparam(f"read_{name}", expanding=name in ("states", "types", "scopes")) for name in form
    }
    return _conditions(_Terms(**bound))


def read_parameters(tenant_id: uuid.UUID, namespace_id: uuid.UUID, f: MemoryFilters | None) -> dict[str, Any]:
    """The values of ``bound_read_conditions(filter_form(f))``."""
    return {f"read_{name}": v for name, v in _values(tenant_id, namespace_id, f or MemoryFilters()).items()}


def owner_of(scope: str, user_id: str | None, session_id: str | None) -> str:
    """The owner a key is unique under at this scope level (see uq_memories_current_key)."""
    return (session_id if scope == "session" else user_id if scope == "user" else None) or ""


async def current_for_key(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID | None,
    *,
    scope: str,
    owner: str,
    type: str,
    key: str,
) -> Memory | None:
    """The current memory under (scope, owner, type, key), locked until the transaction ends.

    A transaction-scoped advisory lock on the key comes first: concurrent writers of one key
    queue here instead of all inserting and all but one failing on uq_memories_current_key."""
    lock_name = f"memvault:key:{tenant_id}:{namespace_id}:{scope}:{owner}:{type}:{key}"
    await s.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"), {"k": lock_name})
    owner_col = Memory.session_id if scope == "session" else Memory.user_id if scope == "user" else None
    stmt = select(Memory).where(
        Memory.tenant_id == tenant_id,
        Memory.namespace_id == namespace_id if namespace_id is not None else Memory.namespace_id.is_(None),
        Memory.scope == scope,
        Memory.type == type,
        Memory.key == key,
        Memory.superseded_at.is_(None),
    )
    if owner_col is not None:
        stmt = stmt.where(owner_col == owner)
    return await s.scalar(stmt.with_for_update())


async def supersede(
    s: AsyncSession, tenant_id: uuid.UUID, old: Memory, new_id: uuid.UUID, valid_to: datetime | None
) -> Memory:
    # What the new version says became true then stopped being true of the old one, unless the
    # writer already bounded the old one's valid time. Chosen here rather than with coalesce() in
    # the statement: ``old`` is locked (current_for_key), and Citus refuses a function that is not
    # immutable inside COALESCE (issue 26).
    ends: Any = old.valid_to or valid_to or func.statement_timestamp()
    stmt = (
        update(Memory)
        .where(Memory.tenant_id == tenant_id, Memory.id == old.id)
        .values(
            # The statement's time, later than every earlier statement of the transaction (the
            # new version's insert among them), as clock_timestamp() was; but stable, which Citus
            # requires of a function in an UPDATE of a distributed table.
            superseded_at=func.statement_timestamp(),
            superseded_by=new_id,
            valid_to=ends,
            updated_at=func.now(),
        )
        .returning(Memory)
    )
    result = await s.scalar(stmt, execution_options={"synchronize_session": False, "populate_existing": True})
    assert result is not None
    return result


SNAPSHOT_FIELDS = (
    "content",
    "type",
    "key",
    "scope",
    "state",
    "user_id",
    "agent_id",
    "session_id",
    "importance",
    "confidence",
    "valid_from",
    "valid_to",
    "superseded_at",
    "superseded_by",
)


def snapshot(m: Memory) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in SNAPSHOT_FIELDS:
        value = getattr(m, name)
        out[name] = (
            value.isoformat() if isinstance(value, datetime) else str(value) if isinstance(value, uuid.UUID) else value
        )
    out["metadata"] = m.metadata_
    return out


async def record_history(
    s: AsyncSession, tenant_id: uuid.UUID, memories: Sequence[Memory], action: str, actor: str, fields: list[str]
) -> None:
    if not memories:
        return
    await s.execute(
        insert(MemoryHistoryEntry),
        [
            {
                "tenant_id": tenant_id,
                "memory_id": m.id,
                "action": action,
                "actor": actor,
                "changed_fields": fields,
                "snapshot": snapshot(m),
            }
            for m in memories
        ],
    )


async def version_chain(s: AsyncSession, tenant_id: uuid.UUID, memory_id: uuid.UUID) -> list[Memory]:
    """Every version linked to this one by supersession, oldest first, found by one recursive query.

    A link counts only when both ends name each other: a duplicate merged into another memory
    points at it with superseded_by, but that memory is not a version of the duplicate."""
    chain = text(
        """
        WITH RECURSIVE back(id, depth) AS (
            SELECT id, 0 FROM memories WHERE tenant_id = :t AND id = :m
            UNION
            SELECT prev.id, b.depth + 1
            FROM back b
            JOIN memories cur ON cur.tenant_id = :t AND cur.id = b.id
            JOIN memories prev ON prev.tenant_id = :t AND prev.id = cur.supersedes AND prev.superseded_by = cur.id
            WHERE b.depth < 10000
        ), fwd(id, depth) AS (
            SELECT id, 0 FROM memories WHERE tenant_id = :t AND id = :m
            UNION
            SELECT nxt.id, f.depth + 1
            FROM fwd f
            JOIN memories cur ON cur.tenant_id = :t AND cur.id = f.id
            JOIN memories nxt ON nxt.tenant_id = :t AND nxt.id = cur.superseded_by AND nxt.supersedes = cur.id
            WHERE f.depth < 10000
        )
        SELECT id FROM back UNION SELECT id FROM fwd
        """
    ).columns(id=UUID(as_uuid=True))
    ids = list((await s.scalars(chain, {"t": tenant_id, "m": memory_id})).all())
    if not ids:
        return []
    rows = await s.scalars(
        select(Memory).where(Memory.tenant_id == tenant_id, Memory.id.in_(ids)).order_by(Memory.recorded_at, Memory.id)
    )
    return list(rows.all())


async def merged_into(s: AsyncSession, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    """Rows superseded by any of ``ids``: earlier versions, and duplicates merged into them."""
    rows = await s.scalars(select(Memory.id).where(Memory.tenant_id == tenant_id, Memory.superseded_by.in_(list(ids))))
    return list(rows.all())


async def history_entries(s: AsyncSession, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> list[MemoryHistoryEntry]:
    rows = await s.scalars(
        select(MemoryHistoryEntry)
        .where(MemoryHistoryEntry.tenant_id == tenant_id, MemoryHistoryEntry.memory_id.in_(list(ids)))
        .order_by(MemoryHistoryEntry.id)
    )
    return list(rows.all())


async def insert_many(s: AsyncSession, rows: list[dict[str, Any]]) -> list[Memory]:
    result = await s.scalars(insert(Memory).returning(Memory, sort_by_parameter_order=True), rows)
    return list(result.all())


async def get(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID | None,
    memory_id: uuid.UUID,
    *,
    lock: bool = False,
    reader: str | None = None,
) -> Memory | None:
    stmt = select(Memory).where(*scope_conditions(tenant_id, namespace_id, reader), Memory.id == memory_id)
    if lock:
        stmt = stmt.with_for_update()
    return await s.scalar(stmt, execution_options={"populate_existing": True})


async def get_system(s: AsyncSession, memory_id: uuid.UUID) -> Memory | None:
    """A system-scope memory, which every tenant may read (RLS policy system_read)."""
    return await s.scalar(
        select(Memory).where(Memory.tenant_id == SYSTEM_TENANT_ID, Memory.scope == "system", Memory.id == memory_id)
    )


async def page(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    filters: MemoryFilters | None,
    *,
    limit: int,
    cursor: str | None,
) -> tuple[list[Memory], str | None]:
    """Newest first, keyset-paginated on (created_at, id) so pages never skip or repeat rows."""
    branches = read_branches(tenant_id, namespace_id, filters)
    rows, next_cursor = await newest_first_of(s, Memory, branches, limit=limit, cursor=cursor)
    if system_apart() and await system_shared(s):
        # On Citus: the system tenant's shared rows from their own shard (memories/split.py).
        async with reading_as_system(s, tenant_id):
            shared_branches = read_branches(SYSTEM_TENANT_ID, namespace_id, filters)
            shared, more = await newest_first_of(s, Memory, shared_branches, limit=limit, cursor=cursor)
        shown = await unshadowed(s, tenant_id, namespace_id, filters, shared, lambda m: m)
        return split.merge_pages(rows, shown, limit, next_cursor is not None or more is not None)
    return list(rows), next_cursor


async def unshadowed(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    filters: MemoryFilters | None,
    shared: Sequence[T],
    memory_of: Callable[[T], Memory],
) -> list[T]:
    """The system tenant's ``shared`` rows read apart (on Citus, memories/split.py; memories, or
    hits with ``memory_of``) less those the tenant holds a narrower memory of the same type and key
    for, visible to the same reader at the same time: what the reader sees, as on one node, where
    the read conditions' shadowing test hides them inside the one statement. One statement on the
    tenant's shard, only when a shared row has a key."""
    pairs = {(m.type, m.key) for m in map(memory_of, shared) if m.key is not None}
    if not pairs:
        return list(shared)
    # system_apart(): the strict chain holds the tenant's levels only, every one narrower than system.
    t = _Terms(**_values(tenant_id, namespace_id, filters or MemoryFilters()))
    rows = await s.execute(
        select(Memory.type, Memory.key)
        .where(
            Memory.tenant_id == tenant_id,  # said plainly: Citus routes the statement by it
            tuple_(Memory.type, Memory.key).in_(list(pairs)),
            *_may_shadow(Memory, t),
        )
        .distinct()
    )
    hidden = {(type_, key) for type_, key in rows}
    return [row for row in shared if ((m := memory_of(row)).type, m.key) not in hidden]


async def update_fields(s: AsyncSession, tenant_id: uuid.UUID, memory_id: uuid.UUID, values: dict[str, Any]) -> Memory:
    stmt = (
        update(Memory)
        .where(Memory.tenant_id == tenant_id, Memory.id == memory_id)
        .values(**values, updated_at=func.now())
        .returning(Memory)
    )
    # populate_existing: the caller may already hold this row (read to check it); without it the
    # session hands back that stale object instead of the values the UPDATE returned.
    m = await s.scalar(stmt, execution_options={"synchronize_session": False, "populate_existing": True})
    assert m is not None  # the caller holds the row locked
    return m


async def remove_ids(s: AsyncSession, tenant_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> int:
    """Delete rows for good; their history and entity links go with them (ON DELETE CASCADE)."""
    stmt = delete(Memory).where(Memory.tenant_id == tenant_id, Memory.id.in_(list(ids))).returning(Memory.id)
    return len((await s.scalars(stmt)).all())


async def get_and_touch(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    memory_id: uuid.UUID,
    *,
    accesses: int = 1,
    reader: str | None = None,
) -> Memory | None:
    """The memory, counting ``accesses`` (this read and any not yet written, memories/access.py)."""
    stmt = (
        update(Memory)
        .where(*scope_conditions(tenant_id, namespace_id, reader), Memory.id == memory_id)
        .values(access_count=Memory.access_count + accesses, last_accessed_at=func.now())
        .returning(Memory)
    )
    return await s.scalar(stmt, execution_options={"synchronize_session": False, "populate_existing": True})


async def count_accesses(
    s: AsyncSession, tenant_id: uuid.UUID, accesses: Sequence[tuple[uuid.UUID, int, datetime]]
) -> None:
    """Add (memory id, accesses, time of the last) to the memories' counts, in one statement. A
    memory deleted since is skipped."""
    if not accesses:
        return
    ids, counts, lasts = (list(column) for column in zip(*accesses, strict=True))
    found = (
        func.unnest(
            bindparam("ids", ids, type_=ARRAY(UUID(as_uuid=True))),
            bindparam("counts", counts, type_=ARRAY(Integer)),
            bindparam("lasts", lasts, type_=ARRAY(DateTime(timezone=True))),
        )
        .table_valued("id", "count", "last")
        .render_derived(name="accessed")
    )
    await s.execute(
        update(Memory)
        .where(Memory.tenant_id == tenant_id, Memory.id == found.c.id)
        .values(
            access_count=Memory.access_count + found.c.count,
            last_accessed_at=func.greatest(Memory.last_accessed_at, found.c.last),
        ),
        execution_options={"synchronize_session": False},
    )


# Decay stops at 2^-1000 (zero to any ranking): past it PostgreSQL's exp() and power() raise underflow.
MAX_HALF_LIVES = 1000.0


def strength_of(m: Any, *, now: Any, half_life_days: float | ColumnElement[Any]) -> Any:
    """A memory's strength (docs/workers.md, "Decay"): recency halves every half-life since its last
    recall (else its creation), recall multiplies it by 1 + ln(1 + access_count), importance by
    0.5 + importance (the default 0.5 leaves it as is). Decay archives below a threshold; search
    ranks by it. ``m`` is the Memory entity or an alias of it."""
    age_s = func.extract("epoch", now - func.coalesce(m.last_accessed_at, m.created_at))
    return (
        func.power(0.5, func.least(func.greatest(age_s, 0.0) / 86400.0 / half_life_days, MAX_HALF_LIVES))
        * (1 + func.ln(1 + m.access_count))
        * (0.5 + m.importance)
    )


async def system_shared(s: AsyncSession) -> bool:
    """Whether the system tenant holds any live shared memory (one index probe on its shard): on
    Citus, whether a tenant's read must also read the system tenant's shard (memories/split.py)."""
    probe = exists().where(
        Memory.tenant_id == SYSTEM_TENANT_ID, Memory.scope == "system", Memory.superseded_at.is_(None)
    )
    return bool(await s.scalar(select(probe)))
