"""Queries of observations. Every function filters by tenant and namespace explicitly."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.events.models import Event
from memvault.observations.models import Observation


async def session_events(
    s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, session_id: str, *, limit: int
) -> list[Event]:
    """The newest ``limit`` events of a session, in conversation order."""
    newest = (
        select(Event)
        .where(Event.tenant_id == tenant_id, Event.namespace_id == namespace_id, Event.session_id == session_id)
        .order_by(Event.occurred_at.desc(), Event.seq.desc())
        .limit(limit)
    )
    rows = list((await s.scalars(newest)).all())
    rows.reverse()
    return rows


async def get(s: AsyncSession, tenant_id: uuid.UUID, namespace_id: uuid.UUID, session_id: str) -> Observation | None:
    return await s.scalar(
        select(Observation).where(
            Observation.tenant_id == tenant_id,
            Observation.namespace_id == namespace_id,
            Observation.session_id == session_id,
        )
    )


async def upsert(s: AsyncSession, row: dict[str, Any]) -> None:
    """Write a session's observation, replacing the one an earlier run wrote."""
    new = pg_insert(Observation).values(row)
    kept = ("tenant_id", "namespace_id", "session_id", "created_at")
    await s.execute(
        new.on_conflict_do_update(
            index_elements=[Observation.tenant_id, Observation.namespace_id, Observation.session_id],
            # updated_at: the proposed row's default, now(); Citus refuses now() itself here (issue 26).
            set_={**{k: new.excluded[k] for k in row if k not in kept}, "updated_at": new.excluded.updated_at},
        )
    )
