"""The namespace part of the facade: create, list, read, change and delete the isolated memory
spaces of a tenant. NamespaceAPI inherits it."""

from __future__ import annotations

from memvault.errors import Conflict, InvalidInput
from memvault.facade import FacadeBase
from memvault.namespaces import repository as ns_repo
from memvault.namespaces.models import Namespace
from memvault.namespaces.schemas import (
    NamespaceIn,
    NamespaceOut,
    NamespacePatch,
    NamespaceSettings,
    NamespaceSummary,
    NamespaceSummaryPage,
)
from memvault.operations import operation
from memvault.plans.room import require_stored_room
from memvault.principal import Principal

# Counting stops here; a namespace with more memory rows shows the planner's estimate. An
# index-only walk of this many entries takes well under a millisecond, so a page of 50 stays fast.
EXACT_COUNT_CAP = 2_000


class NamespaceExists(Conflict):
    code = "namespace_exists"
    title = "Namespace exists"


def namespace_out(ns: Namespace, memory_count: int | None) -> NamespaceOut:
    return NamespaceOut(
        id=ns.id,
        name=ns.name,
        description=ns.description,
        created_at=ns.created_at,
        memory_count=memory_count,
        settings=NamespaceSettings.model_validate(ns.settings or {}),
    )


class NamespaceOps(FacadeBase):
    @operation("write")
    async def create_namespace(self, p: Principal, body: NamespaceIn) -> NamespaceOut:
        """Create a namespace: an isolated memory space inside the tenant."""
        p.require("admin", body.name)
        limits = (await self._plans.of(p.tenant_id)).limits
        async with self._db.tenant_tx(p.tenant_id) as tx:
            await require_stored_room(tx, limits, "namespaces", adding=1)
            ns = await ns_repo.create(tx.session, p.tenant_id, body.name, body.description)
            if ns is None:
                raise NamespaceExists(f"A namespace named '{body.name}' already exists.")
            await self._audit(tx, p, "namespace.create", namespace_id=ns.id, target_id=body.name)
        return namespace_out(ns, 0)

    @operation("read")
    async def list_namespaces(self, p: Principal) -> list[NamespaceOut]:
        """Namespaces this principal may use, with their memory counts."""
        p.require("read")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            rows = await ns_repo.list_with_counts(tx.session, p.tenant_id, p.namespaces)
        return [namespace_out(ns, n) for ns, n in rows]

    @operation("read")
    async def namespace_summaries(
        self, p: Principal, *, after: str | None = None, limit: int = 50
    ) -> NamespaceSummaryPage:
        """Namespaces this principal may use, by name, a page at a time, each with its memory
        rows (exact up to EXACT_COUNT_CAP, estimated beyond) and when it was last written to."""
        p.require("read")
        if not 1 <= limit <= 200:
            raise InvalidInput("limit must be between 1 and 200", extra={"field": "limit"})
        async with self._db.tenant_tx(p.tenant_id) as tx:
            rows = await ns_repo.summaries(
                tx.session, p.tenant_id, p.namespaces, after=after or "", limit=limit + 1, cap=EXACT_COUNT_CAP + 1
            )
            data = []
            for ns, n, last in rows[:limit]:
                estimated = n > EXACT_COUNT_CAP
                if estimated:
                    # Statistics lag behind writes: never show less than what was counted.
                    n = max(n, await ns_repo.estimated_memories(tx.session, p.tenant_id, ns.id))
                data.append(
                    NamespaceSummary(
                        id=ns.id,
                        name=ns.name,
                        description=ns.description,
                        created_at=ns.created_at,
                        memories=n,
                        estimated=estimated,
                        last_write_at=last,
                    )
                )
        more = len(rows) > limit
        return NamespaceSummaryPage(data=data, next_after=data[-1].name if more and data else None)

    @operation("read")
    async def namespace_names(self, p: Principal, *, limit: int = 500) -> list[str]:
        """The names of the namespaces this principal may use, by name (at most ``limit``):
        for choosing one, without counting anything."""
        p.require("read")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            return await ns_repo.names(tx.session, p.tenant_id, p.namespaces, limit=limit)

    @operation("read")
    async def get_namespace(self, p: Principal, name: str, *, count: bool = True) -> NamespaceOut:
        """One namespace with its settings; ``count=False`` leaves out the exact memory count
        (null), which walks the whole namespace."""
        async with self._open(p, name, "read") as (tx, ns):
            n = await ns_repo.count_memories(tx.session, p.tenant_id, ns.id) if count else None
        return namespace_out(ns, n)

    @operation("write")
    async def update_namespace(self, p: Principal, name: str, patch: NamespacePatch) -> NamespaceOut:
        """Change a namespace's description or settings (search defaults, periodic maintenance)."""
        given = patch.model_fields_set
        async with self._open(p, name, "admin") as (tx, ns):
            if "description" in given:
                ns.description = patch.description
            if "settings" in given and patch.settings is not None:
                merged = dict(ns.settings or {})
                for part in patch.settings.model_fields_set:
                    value = getattr(patch.settings, part)
                    if value is None:
                        merged.pop(part, None)
                    else:
                        merged[part] = value.model_dump(mode="json", exclude_none=True)
                ns.settings = merged
            await ns_repo.save(tx.session, ns)
            await self._audit(
                tx,
                p,
                "namespace.update",
                namespace_id=ns.id,
                target_id=name,
                detail={
                    "fields": sorted(given),
                    "settings": sorted(patch.settings.model_fields_set) if patch.settings else [],
                },
            )
            n = await ns_repo.count_memories(tx.session, p.tenant_id, ns.id)
        return namespace_out(ns, n)

    @operation("write")
    async def delete_namespace(self, p: Principal, name: str) -> None:
        """Delete a namespace and every memory in it, permanently."""
        async with self._open(p, name, "admin") as (tx, ns):
            n = await ns_repo.count_memories(tx.session, p.tenant_id, ns.id)
            await ns_repo.remove(tx.session, p.tenant_id, ns.id)
            await self._audit(
                tx, p, "namespace.delete", namespace_id=ns.id, target_id=name, detail={"memories_deleted": n}
            )
