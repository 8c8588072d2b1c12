"""Newest-first keyset pagination on (a timestamp, the id): one cursor format for every list, so
pages never skip or repeat rows while others write, and a cursor is opaque to clients."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Select, select, tuple_, union_all
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from memvault.errors import InvalidInput

T = TypeVar("T")


def encode_cursor(at: datetime, row_id: uuid.UUID) -> str:
    raw = json.dumps([at.isoformat(), str(row_id)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        at, row_id = json.loads(raw)
        parsed = datetime.fromisoformat(at)
        if parsed.tzinfo is None:
            raise ValueError("naive timestamp")
        return parsed, uuid.UUID(row_id)
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise InvalidInput("cursor is not one this API returned", extra={"field": "cursor"}) from exc


async def newest_first(
    s: AsyncSession, stmt: Select[Any], at_col: Any, id_col: Any, *, limit: int, cursor: str | None
) -> tuple[Sequence[Any], str | None]:
    """Run ``stmt`` (selecting one entity) newest first by (at_col, id_col), one page of ``limit``."""
    if cursor:
        at, row_id = decode_cursor(cursor)
        stmt = stmt.where(tuple_(at_col, id_col) < tuple_(at, row_id))
    stmt = stmt.order_by(at_col.desc(), id_col.desc()).limit(limit + 1)
    rows = list((await s.scalars(stmt)).all())
    more = len(rows) > limit
    rows = rows[:limit]
    if not (more and rows):
        return rows, None
    last = rows[-1]
    return rows, encode_cursor(getattr(last, at_col.key), getattr(last, id_col.key))


async def newest_first_of(
    s: AsyncSession, entity: Any, branches: Sequence[Sequence[Any]], *, limit: int, cursor: str | None
) -> tuple[Sequence[Any], str | None]:
    """``newest_first`` over the union of ``branches`` (each a set of conditions on ``entity``, the
    sets disjoint), by ``entity``'s (created_at, id). Each branch takes its own newest ``limit + 1``
    along an index on (…, created_at DESC, id DESC) and only those are merged: a single statement
    whose conditions OR the branches together can follow no one index in that order, and sorts
    every row it matches to return the first page."""
    at_col, id_col = entity.created_at, entity.id
    if len(branches) == 1:
        return await newest_first(s, select(entity).where(*branches[0]), at_col, id_col, limit=limit, cursor=cursor)
    after = [tuple_(at_col, id_col) < tuple_(*decode_cursor(cursor))] if cursor else []
    parts = [
        select(entity).where(*conds, *after).order_by(at_col.desc(), id_col.desc()).limit(limit + 1)
        for conds in branches
    ]
    merged = aliased(entity, union_all(*parts).subquery("branches"))
    # The merge's own page: the cursor again (a no-op on rows already past it), the order, the limit.
    return await newest_first(s, select(merged), merged.created_at, merged.id, limit=limit, cursor=cursor)
