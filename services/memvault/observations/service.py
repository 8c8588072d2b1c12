"""The observations part of the facade: the extraction job writes each touched session's
observation (``_observe_sessions``), and callers read it back (``get_observations``).

An observation is rebuilt from the session's newest messages (up to ``SESSION_WINDOW``) every time
extraction runs on new events of that session, so it is always of the session as it now stands;
re-running a job writes the same row again. Observer failures never fail the extraction: the
memories it stored stand, and the session keeps its previous observation.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Iterable
from typing import Any

from memvault.errors import InvalidInput, NotFound
from memvault.events import repository as events_repo
from memvault.events.service import SessionNotFound
from memvault.extraction.base import EventText
from memvault.facade import FacadeBase
from memvault.guard import ensure_no_secrets
from memvault.observations import repository as repo
from memvault.observations.base import Notes, Observer
from memvault.observations.models import Observation
from memvault.observations.rules import RuleObserver
from memvault.observations.schemas import ObservationOut
from memvault.operations import operation
from memvault.principal import Principal

log = logging.getLogger(__name__)

# Messages an observation reads: the newest of its session (an LLM observer sends fewer).
SESSION_WINDOW = 500


class ObservationNotFound(NotFound):
    code = "observation_not_found"
    title = "Observation not found"


def build_observer(settings: Any) -> Observer:
    if settings.extractor == "llm":
        from memvault.observations.llm import LLMObserver

        return LLMObserver(settings, fallback=RuleObserver())
    return RuleObserver()


def observation_out(o: Observation) -> ObservationOut:
    return ObservationOut(
        session_id=o.session_id,
        user_id=o.user_id,
        summary=o.summary,
        topics=list(o.topics),
        decisions=list(o.decisions),
        open_questions=list(o.open_questions),
        observed_by=o.observed_by,
        message_count=o.message_count,
        last_event_at=o.last_event_at,
        job_id=o.job_id,
        updated_at=o.updated_at,
    )


def _without_secrets(values: list[str]) -> list[str]:
    """A model may echo what the guard would refuse: such an item is dropped, not stored."""
    kept = []
    for v in values:
        try:
            ensure_no_secrets(v, field="observation")
        except InvalidInput:
            continue
        kept.append(v)
    return kept


class ObservationOps(FacadeBase):
    @operation("read")
    async def get_observations(self, p: Principal, ns: str, session_id: str) -> ObservationOut:
        """A session's observation: summary, topics, decisions and open questions, as the last
        extraction of the session wrote them. 404 `session_not_found` for an unknown session,
        `observation_not_found` while its extraction has not run yet."""
        async with self._open(p, ns, "read") as (tx, namespace):
            session = await events_repo.get_session(tx.session, p.tenant_id, namespace.id, session_id)
            # Another signed-in user's conversation is not there for this one (acting.py).
            if session is None or not p.sees_owner(session.user_id):
                raise SessionNotFound(f"No session '{session_id}' in namespace '{ns}'.")
            found = await repo.get(tx.session, p.tenant_id, namespace.id, session_id)
            if found is None:
                raise ObservationNotFound(f"Session '{session_id}' has no observation yet: its extraction has not run.")
            return observation_out(found)

    async def _session_observation(self, p: Principal, ns: str, session_id: str) -> ObservationOut | None:
        """The observation for get_context, None when there is none (the caller checked its scope)."""
        async with self._open(p, ns, scope=None) as (tx, namespace):
            found = await repo.get(tx.session, p.tenant_id, namespace.id, session_id)
            session = await events_repo.get_session(tx.session, p.tenant_id, namespace.id, session_id)
            if found is None or session is None or not p.sees_owner(session.user_id):
                return None
            return observation_out(found)

    async def _observe_sessions(
        self, p: Principal, namespace_id: uuid.UUID, session_ids: Iterable[str], job_id: uuid.UUID, stats: Counter[str]
    ) -> None:
        """Write the observation of each session, from its newest messages."""
        observer = build_observer(self._settings)
        try:
            for session_id in dict.fromkeys(session_ids):
                try:
                    await self._observe(p, namespace_id, session_id, job_id, observer)
                    stats["observations_updated"] += 1
                except Exception:
                    log.warning(
                        "observing session %s failed; its previous observation stays", session_id, exc_info=True
                    )
                    stats["observations_failed"] += 1
        finally:
            close = getattr(observer, "aclose", None)
            if close is not None:
                await close()
            stats.update(getattr(observer, "stats", {}))

    async def _observe(
        self, p: Principal, namespace_id: uuid.UUID, session_id: str, job_id: uuid.UUID, observer: Observer
    ) -> None:
        async with self._db.tenant_tx(p.tenant_id) as tx:
            events = await repo.session_events(tx.session, p.tenant_id, namespace_id, session_id, limit=SESSION_WINDOW)
            before = await repo.get(tx.session, p.tenant_id, namespace_id, session_id)
        if not events:
            return
        previous = (
            Notes(before.summary, list(before.topics), list(before.decisions), list(before.open_questions))
            if before is not None
            else None
        )
        texts = [
            EventText(
                id=e.id,
                role=e.role,
                content=e.content,
                occurred_at=e.occurred_at,
                speaker=e.speaker,
                user_id=e.user_id,
                session_id=e.session_id,
            )
            for e in events
        ]
        # The model is asked with no transaction open.
        notes = await observer.observe(texts, previous)
        summary = _without_secrets([notes.summary])
        async with self._db.tenant_tx(p.tenant_id) as tx:
            await repo.upsert(
                tx.session,
                {
                    "tenant_id": p.tenant_id,
                    "namespace_id": namespace_id,
                    "session_id": session_id,
                    "user_id": next((e.user_id for e in reversed(events) if e.user_id), None),
                    "summary": summary[0] if summary else "",
                    "topics": _without_secrets(notes.topics),
                    "decisions": _without_secrets(notes.decisions),
                    "open_questions": _without_secrets(notes.open_questions),
                    "observed_by": observer.name,
                    "message_count": len(events),
                    "last_event_at": events[-1].occurred_at,
                    "job_id": job_id,
                },
            )
