"""Search across kinds (``SearchIn.kinds``): conversation messages, reasoning traces and entities
found by the query's words. Full text for all three: messages and entities carry no embedding,
and one rule keeps scores alike across kinds (``ts_rank_cd`` of any of the query's words, as the
memories' lexical channel matches them). Messages use ``ix_events_words`` (migration 0026), traces
their ``tsv`` column; a namespace's entities are few and read whole."""

from __future__ import annotations

import re
import uuid
from typing import Any

from sqlalchemy import case, func, literal_column, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.entities.models import Entity
from memvault.events.models import Event
from memvault.memories.schemas import MemoryFilters
from memvault.retrieval.sql.common import lexical_query
from memvault.traces.models import Trace

# A constant, not a parameter: the expression must be the index's, word for word.
ENGLISH: Any = literal_column("'english'::regconfig")
_ALNUM = re.compile(r"[^\w]+|_")


def _words(column: Any) -> Any:
    return func.to_tsvector(ENGLISH, column)


async def messages(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    query: str,
    filters: MemoryFilters | None,
    limit: int,
    *,
    reader: str | None = None,
) -> list[tuple[Event, float]]:
    """Messages with any of the query's words, best first; reading as a user or in a session keeps
    to that user's or session's messages."""
    rows = await s.execute(messages_statement(tenant_id, namespace_id, query, filters, limit, reader=reader))
    return [(e, float(r)) for e, r in rows.all()]


def messages_statement(
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    query: str,
    filters: MemoryFilters | None,
    limit: int,
    *,
    reader: str | None = None,
) -> Any:
    q = lexical_query(query)
    rank = func.ts_rank_cd(_words(Event.content), q)
    stmt = select(Event, rank).where(
        Event.tenant_id == tenant_id, Event.namespace_id == namespace_id, _words(Event.content).op("@@")(q)
    )
    if reader is not None:  # a signed-in user: another user's conversations are not there (Principal.reader)
        stmt = stmt.where(or_(Event.user_id.is_(None), Event.user_id == reader))
    if filters is not None:
        if filters.user_id is not None:
            stmt = stmt.where(Event.user_id == filters.user_id)
        if filters.session_id is not None:
            stmt = stmt.where(Event.session_id == filters.session_id)
        if filters.since is not None:
            stmt = stmt.where(Event.occurred_at >= filters.since)
        if filters.until is not None:
            stmt = stmt.where(Event.occurred_at < filters.until)
    return stmt.order_by(rank.desc(), Event.occurred_at.desc(), Event.seq.desc()).limit(limit)


async def traces(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    query: str,
    filters: MemoryFilters | None,
    limit: int,
    *,
    reader: str | None = None,
) -> list[tuple[Trace, float]]:
    """Traces whose task or outcome has any of the query's words, best first; reading as a user or
    in a session keeps to theirs."""
    q = lexical_query(query)
    rank = func.ts_rank_cd(Trace.tsv, q)
    stmt = select(Trace, rank).where(
        Trace.tenant_id == tenant_id, Trace.namespace_id == namespace_id, Trace.tsv.op("@@")(q)
    )
    if reader is not None:
        stmt = stmt.where(or_(Trace.user_id.is_(None), Trace.user_id == reader))
    if filters is not None:
        if filters.user_id is not None:
            stmt = stmt.where(Trace.user_id == filters.user_id)
        if filters.session_id is not None:
            stmt = stmt.where(Trace.session_id == filters.session_id)
    rows = await s.execute(stmt.order_by(rank.desc(), Trace.started_at.desc()).limit(limit))
    return [(t, float(r)) for t, r in rows.all()]


async def entities(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, query: str, limit: int
) -> list[tuple[Entity, float]]:
    """Entities whose name, aliases or description have any of the query's words, best first; one
    the query names outright (its whole name appears in it) ranks above the rest."""
    q = lexical_query(query)
    described = _words(func.concat_ws(" ", Entity.name, func.array_to_string(Entity.aliases, " "), Entity.description))
    # Whole words only: "Ana" is named in "where does Ana live", not in "banana".
    padded = " " + " ".join(_ALNUM.split(query.lower())).strip() + " "
    name = func.regexp_replace(func.lower(Entity.name), r"[^[:alnum:]]+", " ", "g")
    named = func.strpos(padded, func.concat(" ", func.trim(name), " ")) > 0
    score = func.ts_rank_cd(described, q) + case((named, 1.0), else_=0.0)
    stmt = select(Entity, score).where(
        Entity.tenant_id == tenant_id, Entity.namespace_id == namespace_id, or_(described.op("@@")(q), named)
    )
    rows = await s.execute(stmt.order_by(score.desc(), Entity.name).limit(limit))
    return [(e, float(r)) for e, r in rows.all()]
