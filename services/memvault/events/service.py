"""Events and sessions: append raw conversation messages, keep a rollup per session, and hand the
new events to extraction as one job.

Retrying an identical request (same namespace, messages, sessions, users, timestamps and
metadata) appends the events again, because events are append-only and an untimed "ok" said twice
is two messages; but it finds the first request's extraction job instead of making another, so the
same text is not extracted twice. Exactly-once ingest is what the Idempotency-Key header is for.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memvault.errors import InvalidInput, NotFound
from memvault.events import repository as events_repo
from memvault.events.models import ChatSession, Event
from memvault.events.repository import Order
from memvault.events.schemas import (
    EventsIn,
    IngestOut,
    MessageOut,
    MessagePage,
    Role,
    SessionOut,
    SessionPage,
)
from memvault.facade import FacadeBase
from memvault.jobs import repository as jobs_repo
from memvault.jobs.registry import JobKind
from memvault.metering.tally import count
from memvault.operations import operation
from memvault.principal import Principal, UserMismatch

EXTRACTION = JobKind.extraction


class SessionNotFound(NotFound):
    code = "session_not_found"
    title = "Session not found"


@dataclass(frozen=True)
class _Message:
    """A message with the request's defaults applied."""

    session_id: str
    user_id: str | None
    role: str
    speaker: str | None
    content: str
    timestamp: datetime | None
    metadata: dict[str, Any]


def _resolve(body: EventsIn) -> list[_Message]:
    out: list[_Message] = []
    for i, m in enumerate(body.messages):
        session_id = m.session_id or body.session_id
        if session_id is None:
            field = f"messages[{i}].session_id"
            raise InvalidInput(
                f"{field}: every message needs a session; give this one a session_id or set one for the request",
                extra={"field": field},
            )
        out.append(
            _Message(
                session_id=session_id,
                user_id=m.user_id or body.user_id,
                role=m.role.value,
                speaker=m.speaker,
                content=m.content,
                timestamp=m.timestamp,
                metadata=m.metadata,
            )
        )
    return out


def ingest_key(namespace_id: uuid.UUID, messages: list[_Message]) -> str:
    """What makes two ingest requests "the same": the namespace and every resolved message field.

    Event ids cannot serve, since each request gets fresh ones; a timestamp counts only as the
    caller gave it, since the server's arrival time differs on every retry."""
    canonical = [
        str(namespace_id),
        [
            [
                m.session_id,
                m.user_id,
                m.role,
                m.speaker,
                m.content,
                m.timestamp.isoformat() if m.timestamp else None,
                m.metadata,
            ]
            for m in messages
        ],
    ]
    raw = json.dumps(canonical, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "ingest:" + hashlib.sha256(raw.encode()).hexdigest()


def _rollup(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One session row per session touched, sorted by id (the lock order)."""
    by_id: dict[str, dict[str, Any]] = {}
    for r in rows:
        s = by_id.get(r["session_id"])
        if s is None:
            by_id[r["session_id"]] = {
                "tenant_id": r["tenant_id"],
                "namespace_id": r["namespace_id"],
                "id": r["session_id"],
                "user_id": r["user_id"],
                "started_at": r["occurred_at"],
                "last_event_at": r["occurred_at"],
                "message_count": 1,
            }
            continue
        s["started_at"] = min(s["started_at"], r["occurred_at"])
        s["last_event_at"] = max(s["last_event_at"], r["occurred_at"])
        s["message_count"] += 1
        # The latest message that names a user decides, as it would on a later request.
        s["user_id"] = r["user_id"] or s["user_id"]
    return [by_id[k] for k in sorted(by_id)]


def session_out(s: ChatSession) -> SessionOut:
    return SessionOut(
        id=s.id,
        user_id=s.user_id,
        started_at=s.started_at,
        last_event_at=s.last_event_at,
        message_count=s.message_count,
    )


def message_out(e: Event) -> MessageOut:
    return MessageOut(
        id=e.id,
        session_id=e.session_id,
        user_id=e.user_id,
        role=Role(e.role),
        speaker=e.speaker,
        content=e.content,
        timestamp=e.occurred_at,
        recorded_at=e.recorded_at,
        metadata=e.metadata_,
        job_id=e.job_id,
    )


class EventOps(FacadeBase):
    """Events and sessions."""

    @operation("write")
    async def ingest_events(self, p: Principal, ns: str, body: EventsIn) -> IngestOut:
        """Append conversation messages as events, update their sessions, and queue one extraction job.

        All or nothing: a message without a session, or one carrying a secret, stores nothing.
        The job is handed to the workers only after the commit."""
        p.require("write", ns)
        messages = _resolve(body)
        await self._usage.require_monthly_room(p.tenant_id, "events_per_month", adding=len(messages))
        event_ids = [uuid.uuid4() for _ in messages]
        async with self._open(p, ns, scope=None) as (tx, namespace):
            if p.reader is not None:
                # A signed-in user adds to their own conversations only, never to (and so never
                # takes over) another user's session of the same id.
                for sid in dict.fromkeys(m.session_id for m in messages):
                    found = await events_repo.get_session(tx.session, p.tenant_id, namespace.id, sid)
                    if found is not None and not p.sees_owner(found.user_id):
                        raise UserMismatch(
                            f"Session '{sid}' is another user's conversation; choose another session_id.",
                            extra={"field": "session_id"},
                        )
            # Created before the events, which carry its id: the application may not update events.
            job, created = await jobs_repo.create(
                tx.session,
                p.tenant_id,
                namespace_id=namespace.id,
                kind=EXTRACTION,
                payload={"event_ids": [str(i) for i in event_ids], "namespace": ns},
                job_key=ingest_key(namespace.id, messages),
                created_by=p.subject,
            )
            now = await events_repo.now(tx.session)
            rows = [
                {
                    "tenant_id": p.tenant_id,
                    "id": event_id,
                    "namespace_id": namespace.id,
                    "session_id": m.session_id,
                    "user_id": m.user_id,
                    "role": m.role,
                    "speaker": m.speaker,
                    "content": m.content,
                    "metadata_": m.metadata,
                    "occurred_at": m.timestamp or now,
                    "job_id": job.id,
                    "created_by": p.subject,
                }
                for event_id, m in zip(event_ids, messages, strict=True)
            ]
            await events_repo.insert_many(tx.session, rows)
            sessions = await events_repo.upsert_sessions(tx.session, _rollup(rows))
            await self._audit(
                tx,
                p,
                "events.ingest",
                namespace_id=namespace.id,
                target_id=str(job.id),
                detail={"count": len(rows), "sessions": len(sessions), "job_created": created},
            )
            job_id = job.id
            if created:
                # A reused job was dispatched by the request that created it.
                tx.after_commit(lambda: self._jobs.dispatch(p.tenant_id, job_id, EXTRACTION))
        count(events_ingested=len(messages), bytes_stored=sum(len(m.content.encode()) for m in messages))
        first_seen = list(dict.fromkeys(m.session_id for m in messages))
        by_id = {s.id: s for s in sessions}
        return IngestOut(
            job_id=job_id,
            job_created=created,
            event_ids=event_ids,
            sessions=[session_out(by_id[sid]) for sid in first_seen],
        )

    @operation("read")
    async def list_sessions(
        self,
        p: Principal,
        ns: str,
        *,
        user_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> SessionPage:
        """Sessions with the most recent activity first, optionally one user's; follow `next_cursor`."""
        async with self._open(p, ns, "read") as (tx, namespace):
            rows, next_cursor = await events_repo.page_sessions(
                tx.session, p.tenant_id, namespace.id, user_id=user_id, limit=limit, cursor=cursor
            )
        return SessionPage(data=[session_out(s) for s in rows], next_cursor=next_cursor)

    @operation("read")
    async def get_session(self, p: Principal, ns: str, session_id: str) -> SessionOut:
        """One session: its user, time span and message count."""
        async with self._open(p, ns, "read") as (tx, namespace):
            s = await events_repo.get_session(tx.session, p.tenant_id, namespace.id, session_id)
            # Another signed-in user's conversation is not there for this one (acting.py).
            if s is None or not p.sees_owner(s.user_id):
                raise SessionNotFound(f"No session '{session_id}' in namespace '{ns}'.")
        return session_out(s)

    @operation("read")
    async def list_messages(
        self,
        p: Principal,
        ns: str,
        session_id: str,
        *,
        limit: int = 50,
        cursor: str | None = None,
        order: Order = "asc",
        role: Role | list[Role] | None = None,
    ) -> MessagePage:
        """A session's messages in conversation order (oldest first, or newest with order="desc"),
        optionally only some roles; follow `next_cursor`."""
        p.require("read", ns)
        roles = [Role(role)] if isinstance(role, str) else [Role(r) for r in role or ()]
        async with self._open(p, ns, scope=None) as (tx, namespace):
            found = await events_repo.get_session(tx.session, p.tenant_id, namespace.id, session_id)
            if found is None or not p.sees_owner(found.user_id):
                raise SessionNotFound(f"No session '{session_id}' in namespace '{ns}'.")
            rows, next_cursor = await events_repo.page_messages(
                tx.session,
                p.tenant_id,
                namespace.id,
                session_id,
                roles=[r.value for r in roles] or None,
                order=order,
                limit=limit,
                cursor=cursor,
            )
        return MessagePage(data=[message_out(e) for e in rows], next_cursor=next_cursor)
