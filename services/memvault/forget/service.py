"""Forget: archive (soft) or erase (hard) what concerns a user, a session, an entity or a whole
namespace. A hard forget leaves no copy in memories, versions, history, events, sessions,
traces or entity links, and vacuums the tables so their indexes drop the rows too; the audit
log records that it happened and how much, never what."""

from __future__ import annotations

import hashlib
import logging

from memvault import operator
from memvault.audit import repository as audit
from memvault.errors import Forbidden, NotFound
from memvault.facade import FacadeBase
from memvault.forget import repository as repo
from memvault.forget.repository import Selection
from memvault.forget.schemas import ForgetIn, ForgetOut
from memvault.operations import operation
from memvault.principal import Principal
from memvault.webhooks import outbox

log = logging.getLogger(__name__)


class EntityNotFoundForForget(NotFound):
    code = "entity_not_found"
    title = "Entity not found"


# What a hard forget erases besides the memories, per selector, in this order (a user's events
# are found through their sessions, so events go first).
ERASES: dict[str, tuple[str, ...]] = {
    "user_id": ("events", "sessions", "traces"),
    "session_id": ("events", "sessions", "traces"),
    "entity_id": ("relations", "entities"),
    "all": ("events", "sessions", "traces", "relations", "entities"),
}
_ERASE = {
    "events": repo.erase_events,
    "sessions": repo.erase_sessions,
    "traces": repo.erase_traces,
    "relations": repo.erase_relations,
    "entities": repo.erase_entities,
}


class ForgetOps(FacadeBase):
    @operation("write")
    async def forget(self, p: Principal, ns: str, body: ForgetIn) -> ForgetOut:
        """Archive or erase everything a selector names; see ForgetIn."""
        p.require("admin" if body.all else "write", ns)
        if p.reader is not None and body.selector != "user_id":
            # A session's or an entity's rows may be other users' too; until a selection can be
            # narrowed to one owner, a signed-in user forgets their own (acting.py).
            raise Forbidden(
                "Signed in as a user, you forget your own memories: give memory_id, or user_id (yours).",
                extra={"field": body.selector},
            )
        counts = {"memories": 0, "events": 0, "sessions": 0, "traces": 0, "entities": 0, "relations": 0}
        async with self._db.tenant_tx(p.tenant_id) as tx:
            s = tx.session
            namespace = await self._namespace(tx, p, ns)
            value = None if body.all else getattr(body, body.selector)
            sel = Selection(p.tenant_id, namespace.id, body.selector, value)
            if body.entity_id is not None and not await repo.entity_exists(s, sel):
                raise EntityNotFoundForForget(f"No entity {body.entity_id} in namespace '{ns}'.")
            if not body.hard:
                counts["memories"] = await repo.archive_memories(s, sel)
            else:
                counts["memories"] = await repo.erase_memories(s, sel)
                for table in ERASES[body.selector]:
                    counts[table] = await _ERASE[table](s, sel)
            await audit.record(
                s,
                p.tenant_id,
                p.subject,
                "forget.hard" if body.hard else "forget.soft",
                namespace_id=namespace.id,
                # A digest, not the id itself: the log proves what was asked without keeping the
                # identifier the forget was meant to remove.
                target_id=None if body.all else _digest(str(value)),
                detail={"selector": body.selector, **counts},
            )
            out = ForgetOut(hard=body.hard, selector=body.selector, **counts)
            # Counts only: what was forgotten, or whose it was, must not travel on in a payload.
            await outbox.emit(tx, p, "forget.completed", ns, {"namespace": ns, **out.model_dump(mode="json")})
            if body.hard:
                tx.after_commit(self._vacuum)
        return out

    async def _vacuum(self) -> None:
        """Drop the erased rows from the tables' indexes now, not at the next autovacuum. Runs as
        the owner (the app role owns no table) outside any transaction, after the commit."""
        try:
            await operator.vacuum_erased(self._db)
        except Exception:  # the erase is committed; a failed clean-up only delays index cleaning
            log.warning("vacuum after hard forget failed", exc_info=True)


def _digest(value: str) -> str:
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:32]
