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
from memvault.namespaces import repository as ns_repo
from memvault.operations import operation
from memvault.principal import Principal


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
    ) -> AuditPage:
        """The tenant's audit log, newest first. Admin scope; a namespace-limited key sees only
        entries of its namespaces."""
        p.require("admin", namespace)
        before_id: int | None = None
        if cursor is not None:
            # Entry ids are bigints: ASCII digits below 2**63, or the database refuses the comparison.
            if not re.fullmatch(r"[0-9]{1,19}", cursor) or int(cursor) >= 2**63:
                raise InvalidInput("cursor is not one this API returned", extra={"field": "cursor"})
            before_id = int(cursor)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            names = {ns.id: ns.name for ns, _ in await ns_repo.list_with_counts(tx.session, p.tenant_id, None)}
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
            )
        more = len(rows) > limit
        rows = rows[:limit]
        return AuditPage(
            data=[
                AuditEntryOut(
                    id=r.id,
                    at=r.at,
                    actor=r.actor,
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
