"""The audit part of the facade: read the tenant's audit log. Entries are written by each
change's own transaction (``FacadeBase._audit``). NamespaceAPI inherits it."""

from __future__ import annotations

import re
import uuid
from datetime import datetime

from memvault.audit import repository as audit
from memvault.audit.schemas import AuditEntryOut, AuditPage
from memvault.errors import InvalidInput
from memvault.facade import FacadeBase, NamespaceNotFound
from memvault.oauth import repository as oauth_repo
from memvault.operations import operation
from memvault.principal import Principal


def _user_of(actor: str) -> uuid.UUID | None:
    """The member behind an actor `user:<id>` (a dashboard session or an MCP sign-in)."""
    if not actor.startswith("user:"):
        return None
    try:
        return uuid.UUID(actor[5:])
    except ValueError:
        return None


class AuditOps(FacadeBase):
    @operation("read")
    async def list_audit(
        self,
        p: Principal,
        *,
        namespace: str | None = None,
        action: str | None = None,
        target_id: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
        cursor: str | None = None,
        actor: str | None = None,
        until: datetime | None = None,
    ) -> AuditPage:
        """The tenant's audit log, newest first. Admin scope; a namespace-limited key sees only
        entries of its namespaces. ``actor``: one actor's entries (`key:<id>`, `user:<id>`, `cli`,
        or a member's email for that member's); ``since``/``until``: from, and before, instants."""
        p.require("admin", namespace)
        before_id: int | None = None
        if cursor is not None:
            # Entry ids are bigints: ASCII digits below 2**63, or the database refuses the comparison.
            if not re.fullmatch(r"[0-9]{1,19}", cursor) or int(cursor) >= 2**63:
                raise InvalidInput("cursor is not one this API returned", extra={"field": "cursor"})
            before_id = int(cursor)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            names = await audit.namespace_names(tx.session, p.tenant_id)
            if actor is not None and "@" in actor:
                # People know a member by their email; the log knows them by their user id.
                user = await oauth_repo.user_by_email(tx.session, p.tenant_id, actor.strip().lower())
                actor = f"user:{user.id}" if user is not None else actor
            if namespace is not None:
                wanted: list[uuid.UUID] | None = [i for i, n in names.items() if n == namespace]
                if not wanted:
                    raise NamespaceNotFound(f"No namespace named '{namespace}'.")
            elif p.namespaces is not None:
                wanted = [i for i, n in names.items() if n in p.namespaces]
            else:
                wanted = None
            rows = await audit.page(
                tx.session,
                p.tenant_id,
                namespace_ids=wanted,
                action=action,
                target_id=target_id,
                since=since,
                limit=limit + 1,
                before_id=before_id,
                actor=actor,
                until=until,
            )
            more = len(rows) > limit
            rows = rows[:limit]
            members = {u for u in (_user_of(r.actor) for r in rows) if u is not None}
            emails = {f"user:{u}": e for u, e in (await audit.user_emails(tx.session, p.tenant_id, members)).items()}
        return AuditPage(
            data=[
                AuditEntryOut(
                    id=r.id,
                    at=r.at,
                    actor=r.actor,
                    actor_email=emails.get(r.actor),
                    action=r.action,
                    namespace=names.get(r.namespace_id) if r.namespace_id else None,
                    namespace_id=r.namespace_id,
                    target_id=r.target_id,
                    detail=r.detail,
                )
                for r in rows
            ],
            next_cursor=str(rows[-1].id) if more and rows else None,
        )
