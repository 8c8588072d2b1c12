"""Forget: archive (soft) or erase (hard) what concerns a user, a session, an entity or a whole
namespace. A hard forget leaves no copy in memories, versions, history, events, sessions,
traces or entity links, and vacuums the tables so their indexes drop the rows too; the audit
log records that it happened and how much, never what."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.audit import repository as audit
from memvault.errors import NotFound
from memvault.facade import FacadeBase
from memvault.forget.schemas import ForgetIn, ForgetOut
from memvault.principal import Principal

log = logging.getLogger(__name__)

# Tables a hard forget deletes from; VACUUM then removes the dead rows from their indexes.
ERASED_TABLES = (
    "memories",
    "memory_history",
    "memory_entities",
    "events",
    "sessions",
    "traces",
    "trace_steps",
    "entities",
    "relations",
)


class EntityNotFoundForForget(NotFound):
    code = "entity_not_found"
    title = "Entity not found"


def _memory_selection(body: ForgetIn) -> tuple[str, dict[str, Any]]:
    """SQL selecting the ids of the memories concerned (namespace rows only: tenant- and
    system-wide memories belong to no user)."""
    base = "SELECT id FROM memories WHERE tenant_id = :t AND namespace_id = :n"
    if body.user_id is not None:
        return f"{base} AND user_id = :v", {"v": body.user_id}
    if body.session_id is not None:
        return f"{base} AND session_id = :v", {"v": body.session_id}
    if body.entity_id is not None:
        return (
            f"{base} AND id IN (SELECT memory_id FROM memory_entities WHERE tenant_id = :t AND entity_id = :v)",
            {"v": body.entity_id},
        )
    return base, {}


async def _count(s: AsyncSession, sql: str, params: dict[str, Any]) -> int:
    return int((await s.execute(text(sql), params)).scalar_one())


async def _delete(s: AsyncSession, sql: str, params: dict[str, Any]) -> int:
    return len((await s.execute(text(sql + " RETURNING 1"), params)).all())


class ForgetOps(FacadeBase):
    async def forget(self, p: Principal, ns: str, body: ForgetIn) -> ForgetOut:
        """Archive or erase everything a selector names; see ForgetIn."""
        p.require("admin" if body.all else "write", ns)
        counts = {"memories": 0, "events": 0, "sessions": 0, "traces": 0, "entities": 0, "relations": 0}
        async with self._db.tenant_tx(p.tenant_id) as tx:
            s = tx.session
            namespace = await self._namespace(tx, p, ns)
            params: dict[str, Any] = {"t": p.tenant_id, "n": namespace.id}
            if body.entity_id is not None:
                found = await _count(
                    s,
                    "SELECT count(*) FROM entities WHERE tenant_id = :t AND namespace_id = :n AND id = :e",
                    {**params, "e": body.entity_id},
                )
                if not found:
                    raise EntityNotFoundForForget(f"No entity {body.entity_id} in namespace '{ns}'.")
            selected, extra = _memory_selection(body)
            params |= extra
            if not body.hard:
                counts["memories"] = await _count(
                    s,
                    f"WITH a AS (UPDATE memories SET state = 'archived', updated_at = now() WHERE tenant_id = :t "
                    f"AND id IN ({selected}) AND state <> 'archived' AND superseded_at IS NULL RETURNING 1) "
                    "SELECT count(*) FROM a",
                    params,
                )
            else:
                counts.update(await self._erase(s, body, selected, params))
            await audit.record(
                s,
                p.tenant_id,
                p.subject,
                "forget.hard" if body.hard else "forget.soft",
                namespace_id=namespace.id,
                # A digest, not the id itself: the log proves what was asked without keeping the
                # identifier the forget was meant to remove.
                target_id=None if body.all else _digest(str(params["v"])),
                detail={"selector": body.selector, **counts},
            )
            if body.hard:
                tx.after_commit(self._vacuum)
        return ForgetOut(hard=body.hard, selector=body.selector, **counts)

    async def _erase(self, s: AsyncSession, body: ForgetIn, selected: str, params: dict[str, Any]) -> dict[str, int]:
        counts: dict[str, int] = {}
        # Every version of a selected memory goes, even one that no longer matches the selector
        # (a superseded version written before an owner field changed).
        counts["memories"] = await _delete(
            s,
            f"""
            WITH RECURSIVE chain(id) AS (
                {selected}
                UNION
                SELECT m.id FROM memories m JOIN chain c ON m.tenant_id = :t
                    AND (m.superseded_by = c.id OR m.supersedes = c.id)
            )
            DELETE FROM memories WHERE tenant_id = :t AND id IN (SELECT id FROM chain)
            """,
            params,
        )
        where_ns = "tenant_id = :t AND namespace_id = :n"
        if body.user_id is not None:
            sessions = f"SELECT id FROM sessions WHERE {where_ns} AND user_id = :v"
            counts["events"] = await _delete(
                s, f"DELETE FROM events WHERE {where_ns} AND (user_id = :v OR session_id IN ({sessions}))", params
            )
            counts["sessions"] = await _delete(s, f"DELETE FROM sessions WHERE {where_ns} AND user_id = :v", params)
            counts["traces"] = await _delete(s, f"DELETE FROM traces WHERE {where_ns} AND user_id = :v", params)
        elif body.session_id is not None:
            counts["events"] = await _delete(s, f"DELETE FROM events WHERE {where_ns} AND session_id = :v", params)
            counts["sessions"] = await _delete(s, f"DELETE FROM sessions WHERE {where_ns} AND id = :v", params)
            counts["traces"] = await _delete(s, f"DELETE FROM traces WHERE {where_ns} AND session_id = :v", params)
        elif body.entity_id is not None:
            counts["relations"] = await _delete(
                s,
                f"DELETE FROM relations WHERE {where_ns} AND (source_id = :v OR target_id = :v)",
                params,
            )
            counts["entities"] = await _delete(s, f"DELETE FROM entities WHERE {where_ns} AND id = :v", params)
        else:
            counts["events"] = await _delete(s, f"DELETE FROM events WHERE {where_ns}", params)
            counts["sessions"] = await _delete(s, f"DELETE FROM sessions WHERE {where_ns}", params)
            counts["traces"] = await _delete(s, f"DELETE FROM traces WHERE {where_ns}", params)
            counts["relations"] = await _delete(s, f"DELETE FROM relations WHERE {where_ns}", params)
            counts["entities"] = await _delete(s, f"DELETE FROM entities WHERE {where_ns}", params)
        for key in ("events", "sessions", "traces", "entities", "relations"):
            counts.setdefault(key, 0)
        return counts

    async def _vacuum(self) -> None:
        """Drop the erased rows from the tables' indexes now, not at the next autovacuum. Runs as
        the owner (the app role owns no table) outside any transaction, after the commit."""
        try:
            async with self._db.owner_engine.connect() as conn:
                conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
                await conn.execute(text(f"VACUUM (INDEX_CLEANUP ON) {', '.join(ERASED_TABLES)}"))
        except Exception:  # the erase is committed; a failed clean-up only delays index cleaning
            log.warning("vacuum after hard forget failed", exc_info=True)


def _digest(value: str) -> str:
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:32]
