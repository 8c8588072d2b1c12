from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import func, insert, select, tuple_
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.errors import InvalidInput
from memvault.events.models import ChatSession, Event

Order = Literal["asc", "desc"]


async def now(s: AsyncSession) -> datetime:
    """The transaction's timestamp: what `recorded_at` gets, so an untimed message has occurred_at == recorded_at."""
    return (await s.execute(select(func.now()))).scalar_one()


async def insert_many(s: AsyncSession, rows: list[dict[str, Any]]) -> list[Event]:
    # Sorted by parameter order: the statement inserts in that order, so `seq` follows the request.
    result = await s.scalars(insert(Event).returning(Event, sort_by_parameter_order=True), rows)
    return list(result.all())


async def upsert_sessions(s: AsyncSession, rows: list[dict[str, Any]]) -> list[ChatSession]:
    """Create or extend sessions: widen their time span, add to their count, take a given user_id.

    Callers pass one row per session, sorted by id, so concurrent ingests lock rows in one order."""
    new = pg_insert(ChatSession).values(rows)
    stmt = new.on_conflict_do_update(
        index_elements=[ChatSession.tenant_id, ChatSession.namespace_id, ChatSession.id],
        set_={
            "started_at": func.least(ChatSession.started_at, new.excluded.started_at),
            "last_event_at": func.greatest(ChatSession.last_event_at, new.excluded.last_event_at),
            "message_count": ChatSession.message_count + new.excluded.message_count,
            "user_id": func.coalesce(new.excluded.user_id, ChatSession.user_id),
            # The proposed row's own default, now(): Citus takes no function but an immutable one
            # in DO UPDATE SET on a distributed table (issue 26).
            "updated_at": new.excluded.updated_at,
        },
    ).returning(ChatSession)
    result = await s.scalars(stmt, execution_options={"populate_existing": True})
    return list(result.all())


async def get_session(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, session_id: str
) -> ChatSession | None:
    return await s.scalar(
        select(ChatSession).where(
            ChatSession.tenant_id == tenant_id,
            ChatSession.namespace_id == namespace_id,
            ChatSession.id == session_id,
        )
    )


# ---- cursors: opaque base64 JSON, tagged with what they page through ---------------------------


def _encode(payload: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


MAX_SEQ = 2**63 - 1


def _bad_cursor() -> InvalidInput:
    return InvalidInput("cursor is not one this API returned for this list", extra={"field": "cursor"})


def _decode(cursor: str, tag: str) -> list[Any]:
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, TypeError) as exc:
        raise _bad_cursor() from exc
    if not isinstance(raw, list) or len(raw) != 3 or raw[0] != tag:
        raise _bad_cursor()
    return raw


def _instant(value: Any) -> datetime:
    try:
        at = datetime.fromisoformat(value)
    except (ValueError, TypeError) as exc:
        raise _bad_cursor() from exc
    if at.tzinfo is None:
        raise _bad_cursor()
    return at


async def page_sessions(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    *,
    user_id: str | None,
    limit: int,
    cursor: str | None,
) -> tuple[list[ChatSession], str | None]:
    """Most recent activity first, keyset-paginated on (last_event_at, id)."""
    stmt = select(ChatSession).where(ChatSession.tenant_id == tenant_id, ChatSession.namespace_id == namespace_id)
    if user_id is not None:
        stmt = stmt.where(ChatSession.user_id == user_id)
    if cursor:
        _, at, sid = _decode(cursor, "sessions")
        if not isinstance(sid, str) or "\x00" in sid:
            raise _bad_cursor()
        stmt = stmt.where(tuple_(ChatSession.last_event_at, ChatSession.id) < tuple_(_instant(at), sid))
    stmt = stmt.order_by(ChatSession.last_event_at.desc(), ChatSession.id.desc()).limit(limit + 1)
    rows = list((await s.scalars(stmt)).all())
    more = len(rows) > limit
    rows = rows[:limit]
    last = rows[-1] if rows else None
    return rows, (_encode(["sessions", last.last_event_at.isoformat(), last.id]) if more and last else None)


async def page_messages(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    session_id: str,
    *,
    roles: list[str] | None,
    order: Order,
    limit: int,
    cursor: str | None,
) -> tuple[list[Event], str | None]:
    """A session's messages in conversation order (occurred_at, then arrival), either direction."""
    tag = f"messages:{order}"
    stmt = select(Event).where(
        Event.tenant_id == tenant_id, Event.namespace_id == namespace_id, Event.session_id == session_id
    )
    if roles:
        stmt = stmt.where(Event.role.in_(roles))
    if cursor:
        _, at, seq = _decode(cursor, tag)
        # Out-of-range numbers would fail in PostgreSQL, as a 500 instead of this 422.
        if type(seq) is not int or not 0 <= seq <= MAX_SEQ:
            raise _bad_cursor()
        key, after = tuple_(Event.occurred_at, Event.seq), tuple_(_instant(at), seq)
        stmt = stmt.where(key > after if order == "asc" else key < after)
    if order == "asc":
        stmt = stmt.order_by(Event.occurred_at.asc(), Event.seq.asc())
    else:
        stmt = stmt.order_by(Event.occurred_at.desc(), Event.seq.desc())
    rows = list((await s.scalars(stmt.limit(limit + 1))).all())
    more = len(rows) > limit
    rows = rows[:limit]
    last = rows[-1] if rows else None
    return rows, (_encode([tag, last.occurred_at.isoformat(), last.seq]) if more and last else None)
