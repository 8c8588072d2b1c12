"""The words of messages (a search across kinds) have an index (migration 0026): the statement's
text expression must be the index's, constant for constant, or the planner can never use it."""

from __future__ import annotations

import psycopg
from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect

from memvault.events.models import Event
from memvault.retrieval.sql.common import lexical_query
from memvault.retrieval.sql.kinds import ENGLISH


async def test_the_words_of_messages_can_be_looked_up_by_their_index(owner_conn: psycopg.AsyncConnection) -> None:
    stmt = select(Event.id).where(func.to_tsvector(ENGLISH, Event.content).op("@@")(lexical_query("Valletta ferry")))
    compiled = stmt.compile(dialect=psycopg_dialect.dialect())
    async with owner_conn.transaction():
        # Planned as if the table were large: a scan is cheaper on the few rows tests hold.
        await owner_conn.execute("SET LOCAL enable_seqscan = off")
        cur = await owner_conn.execute("EXPLAIN " + str(compiled), compiled.params)  # type: ignore[arg-type]
        plan = "\n".join(row[0] for row in await cur.fetchall())
    assert "ix_events_words" in plan, plan
