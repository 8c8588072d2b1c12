"""What every read of memories applies inside SQL: the read conditions (the scope chain, time,
lifecycle, filters, narrowest scope wins), as plain values or as bound parameters for a statement
kept across calls; a memory's date and strength; and, on Citus, the system tenant's shared rows
read apart and shadowed here. Expressions that list, search and maintenance all build on, apart
from the rows' own reads and writes (memories/repository.py)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar

from sqlalchemy import BindParameter, ColumnElement, and_, bindparam, case, exists, func, or_, select, true, tuple_
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from memvault.db.session import system_apart
from memvault.entities.models import MemoryEntity
from memvault.memories.models import Memory
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
    cues and session order all go by it (and the session index, migration 0009, holds it). Of a
    memory already read: memories.schemas.occurred."""
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
    return (*_filters(t), _unshadowed(t))


def _filters(t: _Terms) -> tuple[Any, ...]:
    return (*_time(Memory, t), *_fields(t))


def _unshadowed(t: _Terms) -> Any:
    """Narrowest scope wins: no narrower memory of the same type and key is there for the reader."""
    narrower = aliased(Memory)
    shadowed = exists().where(
        narrower.key == Memory.key,
        narrower.type == Memory.type,
        _rank(narrower) < _rank(Memory),
        *_may_shadow(narrower, t),
    )
    return or_(Memory.key.is_(None), ~shadowed)


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


def bound_read_conditions(form: tuple[str, ...]) -> tuple[Any, ...]:
    """``read_conditions`` with every value a bound parameter named ``read_<term>`` (see
    ``read_parameters``): one set of conditions, and the statements built on them, serves every
    tenant, namespace and filter value of the same ``filter_form``."""
    first, unshadowed = bound_read_split(form)
    return (*first, unshadowed)


@lru_cache(maxsize=256)
def bound_read_split(form: tuple[str, ...]) -> tuple[tuple[Any, ...], Any]:
    """``bound_read_conditions`` as (every condition but narrowest-scope-wins, that one), on the
    same parameters. A statement that scans with the first and keeps what it found with the second
    tests the narrower memories once, on the rows kept, rather than in every scan: each test is
    a correlated subquery PostgreSQL plans anew for every filtered search (docs/benchmarks.md)."""
    bound: dict[str, BindParameter[Any]] = {
        name: bindparam(f"read_{name}", expanding=name in ("states", "types", "scopes")) for name in form
    }
    t = _Terms(**bound)
    return (_chain(Memory, t, strict=False), *_filters(t)), _unshadowed(t)


def read_parameters(tenant_id: uuid.UUID, namespace_id: uuid.UUID, f: MemoryFilters | None) -> dict[str, Any]:
    """The values of ``bound_read_conditions(filter_form(f))``."""
    return {f"read_{name}": v for name, v in _values(tenant_id, namespace_id, f or MemoryFilters()).items()}


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
