"""What the MCP overview resources read: a credential's memory across all the namespaces it reaches
(counts, entities, preferences, one memory by id wherever it lives). Listings go through the
capability operations (list_entities, list_memories, get_memory), so their rules (scopes, the
reader's scope chain) hold here too; only the counts are statements of their own."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, cast

from memvault.entities.schemas import EntityOut
from memvault.facade import FacadeBase
from memvault.memories.schemas import MemoryFilters, MemoryOut, MemoryType
from memvault.memories.service import MemoryNotFound
from memvault.operations import operation
from memvault.overview import repository as repo
from memvault.principal import Principal

if TYPE_CHECKING:
    from memvault.api import NamespaceAPI

# Each overview is a bounded answer however much is stored.
MAX_ITEMS = 200


class OverviewOps(FacadeBase):
    @property
    def _api(self) -> NamespaceAPI:
        return cast("NamespaceAPI", self)

    async def _reached(self, p: Principal) -> list[str]:
        return [n.name for n in await self._api.list_namespaces(p)]

    @operation("read")
    async def memory_stats(self, p: Principal) -> dict[str, Any]:
        """Per namespace the credential reaches: current memories by type and state, entities,
        relations, and the namespace's own share of the store (rows, vectors, bytes)."""
        out: dict[str, Any] = {}
        for name in await self._reached(p):
            async with self._open(p, name, "read") as (tx, ns):
                memories = await repo.memory_counts(tx.session, p.tenant_id, ns.id)
                graph = await repo.graph_counts(tx.session, p.tenant_id, ns.id)
            index = memories.pop("index")
            out[name] = {
                "memories": memories,
                "entities": graph["entities"]["total"],
                "relations": graph["relations"]["total"],
                "index": index,
            }
        return {"namespaces": out}

    @operation("read")
    async def graph_stats(self, p: Principal) -> dict[str, Any]:
        """Per namespace the credential reaches: entities and relations by type."""
        out: dict[str, Any] = {}
        for name in await self._reached(p):
            async with self._open(p, name, "read") as (tx, ns):
                out[name] = await repo.graph_counts(tx.session, p.tenant_id, ns.id)
        return {"namespaces": out}

    @operation("read")
    async def overview_entities(self, p: Principal, *, limit: int = MAX_ITEMS) -> dict[str, Any]:
        """The entities of every namespace the credential reaches, newest first, at most ``limit``
        in all; ``truncated`` says when there are more."""
        found: list[EntityOut] = []
        truncated = False
        for name in await self._reached(p):
            room = limit - len(found)
            if room <= 0:
                truncated = True
                break
            page = await self._api.list_entities(p, name, limit=room)
            found += page.data
            truncated = truncated or page.next_cursor is not None
        return {"entities": [e.model_dump(mode="json") for e in found], "truncated": truncated}

    @operation("read")
    async def overview_preferences(
        self, p: Principal, *, user_id: str | None = None, limit: int = MAX_ITEMS
    ) -> dict[str, Any]:
        """Current preference memories the credential reads in every namespace it reaches (through
        each namespace's scope chain, so a tenant-wide one appears once), newest first, at most
        ``limit`` in all."""
        filters = MemoryFilters(type=[MemoryType.preference], user_id=user_id)
        seen: set[uuid.UUID] = set()
        found: list[MemoryOut] = []
        truncated = False
        for name in await self._reached(p):
            room = limit - len(found)
            if room <= 0:
                truncated = True
                break
            page = await self._api.list_memories(p, name, filters, limit=room)
            found += [m for m in page.data if m.id not in seen]
            seen |= {m.id for m in page.data}
            truncated = truncated or page.next_cursor is not None
        return {"preferences": [m.model_dump(mode="json") for m in found], "truncated": truncated}

    @operation("read")
    async def find_memory(self, p: Principal, memory_id: uuid.UUID, *, default_namespace: str) -> MemoryOut:
        """One memory by id in whichever namespace the credential reaches holds it (tenant- and
        system-scope ones through ``default_namespace``). A memory of another tenant, or of a
        namespace this credential does not reach, is not found: the answer does not tell them apart."""
        p.require("read")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            found, name = await repo.namespace_of_memory(tx.session, p.tenant_id, memory_id)
        # A tenant-scope memory (no namespace) or a system one (another tenant's rows, readable by
        # all) is read through the default namespace's scope chain, as get_memory does.
        where = name if found and name is not None else default_namespace
        if not p.can_access(where):
            raise MemoryNotFound(f"No memory {memory_id} in the namespaces this credential reaches.")
        return await self._api.get_memory(p, where, memory_id)
