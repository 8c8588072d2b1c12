"""The extraction part of the facade: the `extraction` job turns a job's events into memories.

Exactly once, however often it runs: events are taken in chunks, and a chunk's new memories are
stored in one transaction citing their events (`source_event_ids`). A re-run (after a crash, or a
duplicate dispatch) first asks which events some memory already cites and skips them. Candidates
go through the ordinary write path (`store_many`: secrets guard, supersession by key, history,
audit), stored `tentative`; a candidate whose exact text is already remembered for the same owner
and type reinforces that memory (one more mention, its events cited) instead of copying it.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any, cast

from pydantic import ValidationError

from memvault.entities.schemas import EntityIn, EntityType
from memvault.errors import InvalidInput
from memvault.extraction import repository as repo
from memvault.extraction.base import Candidate, EventText, Extractor
from memvault.extraction.rules import RuleExtractor
from memvault.facade import FacadeBase
from memvault.guard import ensure_no_secrets
from memvault.jobs.models import Job
from memvault.jobs.registry import JobKind, handles
from memvault.jobs.service import JobRun
from memvault.memories import changes
from memvault.memories.schemas import MAX_BATCH, MemoryIn, MemoryState, MemoryType, ScopeLevel
from memvault.memories.service import content_hash
from memvault.principal import Principal

if TYPE_CHECKING:
    from memvault.api import NamespaceAPI

log = logging.getLogger(__name__)

# Events per chunk: the unit that commits together, and of progress.
CHUNK = 25


def build_extractor(settings: Any) -> Extractor:
    if settings.extractor == "llm":
        from memvault.extraction.llm import LLMExtractor

        return LLMExtractor(settings, fallback=RuleExtractor())
    return RuleExtractor()


def _owner(c: Candidate) -> tuple[str, str | None]:
    return (c.type, c.user_id)


class ExtractionOps(FacadeBase):
    @handles(JobKind.extraction)
    async def _job_extraction(self, p: Principal, job: Job, run: JobRun) -> dict[str, Any]:
        """Extract memories from the job's events (payload: namespace, event_ids). A cancel stops
        it between chunks; what earlier chunks stored stays."""
        ns = str(job.payload.get("namespace", ""))
        try:
            wanted = [uuid.UUID(str(i)) for i in job.payload.get("event_ids", [])]
        except ValueError as exc:
            raise InvalidInput("job payload has a malformed event id") from exc
        async with self._open(p, ns, scope=None) as (tx, namespace):
            events = await repo.events_by_ids(tx.session, p.tenant_id, namespace.id, wanted)
            done = await repo.extracted_event_ids(tx.session, p.tenant_id, namespace.id, wanted)
        todo = [e for e in events if e.id not in done]
        stats: Counter[str] = Counter()
        produced: list[uuid.UUID] = []
        extractor = build_extractor(self._settings)
        left = 0
        try:
            for start in range(0, len(todo), CHUNK):
                if run.cancelled:
                    left = len(todo) - start
                    break
                chunk = todo[start : start + CHUNK]
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
                    for e in chunk
                ]
                candidates = await extractor.extract(texts)
                await self._store_candidates(p, ns, namespace.id, job.id, candidates, stats, extractor.name, produced)
                await run((len(events) - len(todo) + start + len(chunk)) / max(len(events), 1))
        finally:
            close = getattr(extractor, "aclose", None)
            if close is not None:
                await close()
            stats.update(getattr(extractor, "stats", {}))
        if not left:
            # Also on a re-run that found nothing new: the sessions' observations are rebuilt whole.
            sessions = [e.session_id for e in events]
            await cast("NamespaceAPI", self)._observe_sessions(p, namespace.id, sessions, job.id, stats)
        # Sent with the job's success, in the transaction that records it (jobs/service.py).
        run.on_success.append(
            (
                "events.extracted",
                ns,
                {
                    "job_id": str(job.id),
                    "namespace": ns,
                    "event_ids": [str(e.id) for e in events],
                    "memory_ids": [str(i) for i in produced],
                },
            )
        )
        return {
            "extractor": extractor.name,
            "events": len(events),
            "events_already_extracted": len(done),
            **dict(stats),
            **({"cancelled": True, "events_left": left} if left else {}),
        }

    async def _store_candidates(
        self,
        p: Principal,
        ns: str,
        namespace_id: uuid.UUID,
        job_id: uuid.UUID,
        candidates: list[Candidate],
        stats: Counter[str],
        extractor: str,
        produced: list[uuid.UUID],
    ) -> None:
        """Store a chunk's candidates; ``produced`` gets the ids of the memories made."""
        api = cast("NamespaceAPI", self)
        kept: dict[tuple[str, str, str | None], Candidate] = {}
        for c in candidates:
            try:
                ensure_no_secrets(c.content, field="content")
            except InvalidInput:
                stats["refused_secrets"] += 1
                continue
            same = kept.get((content_hash(c.content), *_owner(c)))
            if same is not None:  # said twice in one chunk: one memory citing both events
                same.event_ids = list(dict.fromkeys([*same.event_ids, *c.event_ids]))
                continue
            kept[(content_hash(c.content), *_owner(c))] = c
        if not kept:
            return
        entity_ids = await self._entities_for(p, ns, namespace_id, list(kept.values()), stats)

        # What is already remembered word for word is reinforced, not stored again.
        async with self._db.tenant_tx(p.tenant_id) as tx:
            existing = await repo.current_by_hash(tx.session, p.tenant_id, namespace_id, list({h for h, _, _ in kept}))
            by_key = {(m.content_hash, m.type, m.user_id): m for m in existing}
            for key in [k for k in kept if k in by_key]:
                c = kept.pop(key)
                m = await repo.reinforce(tx.session, p.tenant_id, by_key[key], c.event_ids, {})
                await changes.record(tx, p.tenant_id, p.subject, [m], "updated", ["metadata", "source_event_ids"], ns)
                stats["memories_reinforced"] += 1
            if stats["memories_reinforced"]:
                await self._audit(
                    tx,
                    p,
                    "memory.update",
                    namespace_id=namespace_id,
                    target_id=str(job_id),
                    detail={"reinforced": stats["memories_reinforced"], "job": str(job_id)},
                )

        bodies: list[MemoryIn] = []
        for c in kept.values():
            try:
                bodies.append(
                    MemoryIn(
                        content=c.content,
                        type=MemoryType(c.type),
                        key=c.key,
                        scope=ScopeLevel.user if c.user_id else ScopeLevel.namespace,
                        user_id=c.user_id,
                        session_id=c.session_id,
                        entity_ids=[entity_ids[n.lower()] for n, _ in c.entities if n.lower() in entity_ids],
                        source_event_ids=c.event_ids,
                        metadata={
                            "extracted_by": extractor,
                            "extraction_job": str(job_id),
                            "speaker": c.speaker,
                            "resolved_dates": c.dates,
                            "mentions": 1,
                        },
                        importance=c.importance,
                        confidence=c.confidence,
                        state=MemoryState.tentative,
                        valid_from=c.valid_from,
                    )
                )
            except (ValidationError, ValueError):
                stats["candidates_invalid"] += 1
        for start in range(0, len(bodies), MAX_BATCH):
            stored = await api.store_many(p, ns, bodies[start : start + MAX_BATCH])
            stats["memories_created"] += len(stored)
            produced.extend(out.id for out in stored)
            for out in stored:
                stats[f"type_{out.type.value}"] += 1

    async def _entities_for(
        self, p: Principal, ns: str, namespace_id: uuid.UUID, candidates: list[Candidate], stats: Counter[str]
    ) -> dict[str, uuid.UUID]:
        """Entity ids by lower-cased name: existing ones whatever their type, the rest upserted
        with the most specific type any candidate guessed."""
        api = cast("NamespaceAPI", self)
        guessed: dict[str, tuple[str, str]] = {}
        for c in candidates:
            for name, kind in c.entities:
                have = guessed.get(name.lower())
                if have is None or (have[1] == "other" and kind != "other"):
                    guessed[name.lower()] = (name, kind)
        if not guessed:
            return {}
        async with self._db.tenant_tx(p.tenant_id) as tx:
            known = await repo.entities_by_name(tx.session, p.tenant_id, namespace_id, list(guessed))
        ids = {name: e.id for name, e in known.items()}
        for lower, (name, kind) in guessed.items():
            if lower in ids:
                continue
            try:
                entity, created = await api.upsert_entity(p, ns, EntityIn(name=name, type=EntityType(kind)))
            except (ValidationError, ValueError, InvalidInput):
                continue
            ids[lower] = entity.id
            stats["entities_created"] += int(created)
        return ids
