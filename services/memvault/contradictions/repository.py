"""Contradiction queries. Every function filters by tenant explicitly; row-level security is the
second lock, not the only one."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, func, or_, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from memvault.contradictions.models import Contradiction
from memvault.db.pagination import newest_first
from memvault.memories.models import Memory


def _pair(a: uuid.UUID, b: uuid.UUID) -> Any:
    return or_(
        (Contradiction.memory_id == a) & (Contradiction.other_id == b),
        (Contradiction.memory_id == b) & (Contradiction.other_id == a),
    )


async def insert_open(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    memory_id: uuid.UUID,
    other_id: uuid.UUID,
    note: str | None,
    actor: str,
) -> tuple[Contradiction, bool]:
    """The open mark of this pair: a new one (True), or the one already open, either way round (False)."""
    stmt = (
        insert(Contradiction)
        .values(
            tenant_id=tenant_id,
            namespace_id=namespace_id,
            memory_id=memory_id,
            other_id=other_id,
            note=note,
            created_by=actor,
        )
        .on_conflict_do_nothing(
            index_elements=[
                Contradiction.tenant_id,
                func.least(Contradiction.memory_id, Contradiction.other_id),
                func.greatest(Contradiction.memory_id, Contradiction.other_id),
            ],
            # A literal, not a bound parameter: PostgreSQL matches the partial index only by its
            # predicate's text, and a parameter it cannot see would leave it without a match.
            index_where=text("state = 'open'"),
        )
        .returning(Contradiction)
    )
    created = await s.scalar(stmt)
    if created is not None:
        return created, True
    existing = await open_for_pair(s, tenant_id, memory_id, other_id)
    assert existing is not None  # the conflict was with it, and its transaction committed
    return existing, False


async def get(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, contradiction_id: uuid.UUID, *, lock: bool = False
) -> Contradiction | None:
    stmt = select(Contradiction).where(
        Contradiction.tenant_id == tenant_id,
        Contradiction.namespace_id == namespace_id,
        Contradiction.id == contradiction_id,
    )
    if lock:
        stmt = stmt.with_for_update()
    return await s.scalar(stmt, execution_options={"populate_existing": True})


async def open_for_pair(
    s: AsyncSession, tenant_id: uuid.UUID, a: uuid.UUID, b: uuid.UUID, *, lock: bool = False
) -> Contradiction | None:
    stmt = select(Contradiction).where(Contradiction.tenant_id == tenant_id, Contradiction.state == "open", _pair(a, b))
    if lock:
        stmt = stmt.with_for_update()
    return await s.scalar(stmt, execution_options={"populate_existing": True})


async def resolve(
    s: AsyncSession, tenant_id: uuid.UUID, contradiction_id: uuid.UUID, values: dict[str, Any]
) -> Contradiction:
    stmt = (
        update(Contradiction)
        .where(Contradiction.tenant_id == tenant_id, Contradiction.id == contradiction_id)
        .values(**values, state="resolved", resolved_at=func.now())
        .returning(Contradiction)
    )
    row = await s.scalar(stmt, execution_options={"synchronize_session": False, "populate_existing": True})
    assert row is not None  # the caller holds it locked
    return row


async def page(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    *,
    state: str | None,
    memory_id: uuid.UUID | None,
    limit: int,
    cursor: str | None,
) -> tuple[list[Contradiction], str | None]:
    """Newest first, keyset-paginated on (created_at, id)."""
    stmt = select(Contradiction).where(Contradiction.tenant_id == tenant_id, Contradiction.namespace_id == namespace_id)
    if state is not None:
        stmt = stmt.where(Contradiction.state == state)
    if memory_id is not None:
        stmt = stmt.where(or_(Contradiction.memory_id == memory_id, Contradiction.other_id == memory_id))
    rows, next_cursor = await newest_first(
        s, stmt, Contradiction.created_at, Contradiction.id, limit=limit, cursor=cursor
    )
    return list(rows), next_cursor


def _open_against() -> Any:
    # Built once: every search asks (for its hits), and building a select over two aliases of
    # memories costs more Python than running it (about 1 ms a search, seen in a profile).
    one, two = aliased(Memory), aliased(Memory)
    return (
        select(
            Contradiction.memory_id,
            one.scope,
            one.user_id,
            one.session_id,
            Contradiction.other_id,
            two.scope,
            two.user_id,
            two.session_id,
        )
        .join(one, (one.tenant_id == Contradiction.tenant_id) & (one.id == Contradiction.memory_id))
        .join(two, (two.tenant_id == Contradiction.tenant_id) & (two.id == Contradiction.other_id))
        .where(
            Contradiction.tenant_id == bindparam("tenant_id"),
            Contradiction.state == "open",
            or_(
                Contradiction.memory_id.in_(bindparam("ids", expanding=True)),
                Contradiction.other_id.in_(bindparam("ids", expanding=True)),
            ),
        )
    )


_OPEN_AGAINST = _open_against()


async def open_against(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    memory_ids: Sequence[uuid.UUID],
    *,
    user_id: str | None = None,
    session_id: str | None = None,
) -> dict[uuid.UUID, list[uuid.UUID]]:
    """For each of these memories, the memories an open mark says contradict it. Reading as a user
    or in a session, only those the reader may see: another user's or session's memory is not
    named (its id would say that it exists)."""
    if not memory_ids:
        return {}
    ids = list(memory_ids)
    stmt = _OPEN_AGAINST
    params = {"tenant_id": tenant_id, "ids": ids}

    def seen(scope: str, owner_user: str | None, owner_session: str | None) -> bool:
        if user_id is None and session_id is None:
            return True  # browsing the namespace sees every row of it
        if scope == "user":
            return user_id is not None and owner_user == user_id
        if scope == "session":
            return session_id is not None and owner_session == session_id
        return True

    wanted = set(ids)
    out: dict[uuid.UUID, list[uuid.UUID]] = {}
    for a, a_scope, a_user, a_session, b, b_scope, b_user, b_session in (await s.execute(stmt, params)).all():
        if a in wanted and seen(b_scope, b_user, b_session):
            out.setdefault(a, []).append(b)
        if b in wanted and seen(a_scope, a_user, a_session):
            out.setdefault(b, []).append(a)
    return out
