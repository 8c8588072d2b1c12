"""NamespaceAPI: the one entry point that REST, MCP, jobs and the CLI call.

Every method takes the caller's Principal first, checks its scope, opens a tenant transaction
(RLS-bound), does the work through the capability repositories, records an audit entry for
changes, and returns API schemas. Nothing else opens tenant transactions.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from memvault import __version__
from memvault.audit import repository as audit
from memvault.embeddings import EmbeddingUnavailable
from memvault.entities.service import EntityOps
from memvault.errors import Conflict, Forbidden, InvalidInput, NotFound, Unauthenticated
from memvault.events.service import EventOps
from memvault.facade import FacadeBase
from memvault.keys import repository as keys_repo
from memvault.keys import tokens
from memvault.keys.schemas import KeyCreated, KeyIn, KeyOut
from memvault.memories import repository as memories_repo
from memvault.memories.models import Memory
from memvault.memories.schemas import (
    MemoryFilters,
    MemoryIn,
    MemoryOut,
    MemoryPage,
    MemoryPatch,
)
from memvault.namespaces import repository as ns_repo
from memvault.namespaces.models import Namespace
from memvault.namespaces.schemas import NamespaceIn, NamespaceOut
from memvault.principal import Principal
from memvault.retrieval.hybrid import hybrid_search
from memvault.retrieval.schemas import SearchIn, SearchMetrics, SearchOut, SearchResult, Signals
from memvault.tenants import service as tenants_service
from memvault.traces.service import TraceOps

log = logging.getLogger(__name__)

# A key's last-used time is written at most this often, so reads do not each cost a write.
LAST_USED_RESOLUTION = timedelta(seconds=60)


class MemoryNotFound(NotFound):
    code = "memory_not_found"
    title = "Memory not found"


class KeyNotFound(NotFound):
    code = "api_key_not_found"
    title = "API key not found"


class NamespaceExists(Conflict):
    code = "namespace_exists"
    title = "Namespace exists"


class InvalidApiKey(Unauthenticated):
    code = "invalid_api_key"
    title = "Invalid API key"


class RevokedApiKey(Unauthenticated):
    code = "api_key_revoked"
    title = "API key revoked"


_WS = re.compile(r"\s+")


def content_hash(content: str) -> str:
    """Hash of the normalised text: case and whitespace differences are the same memory."""
    return hashlib.sha256(_WS.sub(" ", content.strip().lower()).encode()).hexdigest()


def memory_out(m: Memory, namespace: str) -> MemoryOut:
    return MemoryOut(
        id=m.id,
        namespace=namespace,
        type=m.type,
        key=m.key,
        content=m.content,
        user_id=m.user_id,
        agent_id=m.agent_id,
        session_id=m.session_id,
        scope=m.scope,
        metadata=m.metadata_,
        importance=m.importance,
        confidence=m.confidence,
        state=m.state,
        valid_from=m.valid_from,
        valid_to=m.valid_to,
        recorded_at=m.recorded_at,
        superseded_at=m.superseded_at,
        superseded_by=m.superseded_by,
        embedding_model=m.embedding_model,
        content_hash=m.content_hash,
        access_count=m.access_count,
        last_accessed_at=m.last_accessed_at,
        created_by=m.created_by,
        created_at=m.created_at,
        updated_at=m.updated_at,
    )


def namespace_out(ns: Namespace, memory_count: int) -> NamespaceOut:
    return NamespaceOut(
        id=ns.id, name=ns.name, description=ns.description, created_at=ns.created_at, memory_count=memory_count
    )


@dataclass(frozen=True)
class Health:
    version: str
    database: bool
    redis: bool | None
    embedding_model: str
    embedded_database: bool


class NamespaceAPI(EntityOps, EventOps, TraceOps, FacadeBase):
    # ---- authentication -------------------------------------------------------------------

    async def authenticate(self, raw_key: str) -> Principal:
        """Resolve a bearer API key to its Principal, or raise 401."""
        if not tokens.looks_like_key(raw_key):
            raise InvalidApiKey("The bearer token is not a memvault API key.")
        async with self._db.unscoped() as s:
            found = await keys_repo.find_by_prefix(s, tokens.lookup_prefix(raw_key))
        if found is None or not tokens.matches(raw_key, found.secret_hash):
            raise InvalidApiKey("The API key is not valid.")
        if found.revoked_at is not None:
            raise RevokedApiKey("The API key has been revoked.")
        now = datetime.now(UTC)
        if found.last_used_at is None or now - found.last_used_at > LAST_USED_RESOLUTION:
            async with self._db.tenant_tx(found.tenant_id) as tx:
                await keys_repo.mark_used(tx.session, found.tenant_id, found.id)
        return Principal(
            tenant_id=found.tenant_id,
            scopes=frozenset(found.scopes),
            subject=f"key:{found.id}",
            namespaces=frozenset(found.namespaces) if found.namespaces is not None else None,
            default_namespace=found.default_namespace,
            key_id=found.id,
        )

    # ---- tenants (operator) ---------------------------------------------------------------

    async def create_tenant(self, name: str, *, namespace: str = "default") -> tenants_service.NewTenant:
        """Create a tenant with one namespace and an admin key (shown once)."""
        async with self._db.owner() as s:
            return await tenants_service.create(s, name, namespace=namespace)

    # ---- namespaces -----------------------------------------------------------------------

    async def create_namespace(self, p: Principal, body: NamespaceIn) -> NamespaceOut:
        """Create a namespace: an isolated memory space inside the tenant."""
        p.require("admin", body.name)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            ns = await ns_repo.create(tx.session, p.tenant_id, body.name, body.description)
            if ns is None:
                raise NamespaceExists(f"A namespace named '{body.name}' already exists.")
            await audit.record(
                tx.session, p.tenant_id, p.subject, "namespace.create", namespace_id=ns.id, target_id=body.name
            )
        return namespace_out(ns, 0)

    async def list_namespaces(self, p: Principal) -> list[NamespaceOut]:
        """Namespaces this principal may use, with their memory counts."""
        p.require("read")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            rows = await ns_repo.list_with_counts(tx.session, p.tenant_id, p.namespaces)
        return [namespace_out(ns, n) for ns, n in rows]

    async def get_namespace(self, p: Principal, name: str) -> NamespaceOut:
        p.require("read", name)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            ns = await self._namespace(tx, p, name)
            n = await ns_repo.count_memories(tx.session, p.tenant_id, ns.id)
        return namespace_out(ns, n)

    async def delete_namespace(self, p: Principal, name: str) -> None:
        """Delete a namespace and every memory in it, permanently."""
        p.require("admin", name)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            ns = await self._namespace(tx, p, name)
            n = await ns_repo.count_memories(tx.session, p.tenant_id, ns.id)
            await ns_repo.remove(tx.session, p.tenant_id, ns.id)
            await audit.record(
                tx.session,
                p.tenant_id,
                p.subject,
                "namespace.delete",
                namespace_id=ns.id,
                target_id=name,
                detail={"memories_deleted": n},
            )

    # ---- API keys -------------------------------------------------------------------------

    async def create_key(self, p: Principal, body: KeyIn) -> KeyCreated:
        """Create an API key. The key is in the response once and never again."""
        p.require("admin")
        if not p.covers(body.namespaces):
            # A key limited to some namespaces cannot mint one that reaches further.
            raise Forbidden("A namespace-limited key can only create keys limited to its own namespaces.")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            row, raw = await keys_repo.create(
                tx.session,
                p.tenant_id,
                name=body.name,
                scopes=body.scopes,
                namespaces=body.namespaces,
                default_namespace=body.default_namespace,
            )
            await audit.record(
                tx.session,
                p.tenant_id,
                p.subject,
                "key.create",
                target_id=str(row.id),
                detail={"scopes": body.scopes, "namespaces": body.namespaces},
            )
        return KeyCreated.model_validate({**KeyOut.model_validate(row).model_dump(), "key": raw})

    async def list_keys(self, p: Principal) -> list[KeyOut]:
        p.require("admin")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            rows = await keys_repo.list_all(tx.session, p.tenant_id)
        return [KeyOut.model_validate(r) for r in rows if p.covers(r.namespaces)]

    async def revoke_key(self, p: Principal, key_id: uuid.UUID) -> KeyOut:
        """Revoke an API key at once; revoking twice is harmless."""
        p.require("admin")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            row = await keys_repo.revoke(tx.session, p.tenant_id, key_id)
            if row is None:
                raise KeyNotFound(f"No API key with id {key_id}.")
            if not p.covers(row.namespaces):
                # Raised inside the transaction, so the revocation rolls back.
                raise Forbidden("A namespace-limited key can only revoke keys limited to its own namespaces.")
            await audit.record(tx.session, p.tenant_id, p.subject, "key.revoke", target_id=str(key_id))
        return KeyOut.model_validate(row)

    # ---- memories -------------------------------------------------------------------------

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        return await self._embedder.embed(texts)

    def _row(self, p: Principal, ns: Namespace, body: MemoryIn, vector: list[float]) -> dict[str, Any]:
        return {
            "id": uuid.uuid4(),
            "tenant_id": p.tenant_id,
            "namespace_id": ns.id,
            "type": body.type.value,
            "key": body.key,
            "content": body.content,
            "user_id": body.user_id,
            "agent_id": body.agent_id,
            "session_id": body.session_id,
            "metadata_": body.metadata,
            "importance": body.importance,
            "confidence": body.confidence,
            "state": body.state.value,
            "valid_from": body.valid_from,
            "valid_to": body.valid_to,
            "embedding": vector,
            "embedding_model": self._embedder.model_id,
            "content_hash": content_hash(body.content),
            "created_by": p.subject,
        }

    async def store(self, p: Principal, ns: str, body: MemoryIn) -> MemoryOut:
        """Store one memory."""
        return (await self.store_many(p, ns, [body]))[0]

    async def store_many(self, p: Principal, ns: str, bodies: list[MemoryIn]) -> list[MemoryOut]:
        """Store memories in one embedding batch and one transaction: all of them or none."""
        p.require("write", ns)
        # Embed before the transaction opens, so no connection waits on the model.
        vectors = await self._embed([b.content for b in bodies])
        async with self._db.tenant_tx(p.tenant_id) as tx:
            namespace = await self._namespace(tx, p, ns)
            rows = [self._row(p, namespace, b, v) for b, v in zip(bodies, vectors, strict=True)]
            created = await memories_repo.insert_many(tx.session, rows)
            await audit.record(
                tx.session,
                p.tenant_id,
                p.subject,
                "memory.create",
                namespace_id=namespace.id,
                target_id=str(created[0].id) if len(created) == 1 else None,
                detail={"count": len(created)} if len(created) > 1 else {},
            )
        return [memory_out(m, ns) for m in created]

    async def get_memory(self, p: Principal, ns: str, memory_id: uuid.UUID) -> MemoryOut:
        p.require("read", ns)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            namespace = await self._namespace(tx, p, ns)
            # One statement both counts the access and returns the row as it now is.
            m = await memories_repo.get_and_touch(tx.session, p.tenant_id, namespace.id, memory_id)
            if m is None:
                raise MemoryNotFound(f"No memory {memory_id} in namespace '{ns}'.")
        return memory_out(m, ns)

    async def list_memories(
        self,
        p: Principal,
        ns: str,
        filters: MemoryFilters | None = None,
        *,
        limit: int = 50,
        cursor: str | None = None,
    ) -> MemoryPage:
        """List memories newest first, with a cursor for the next page."""
        p.require("read", ns)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            namespace = await self._namespace(tx, p, ns)
            rows, next_cursor = await memories_repo.page(
                tx.session, p.tenant_id, namespace.id, filters, limit=limit, cursor=cursor
            )
        return MemoryPage(data=[memory_out(m, ns) for m in rows], next_cursor=next_cursor)

    async def update_memory(self, p: Principal, ns: str, memory_id: uuid.UUID, patch: MemoryPatch) -> MemoryOut:
        """Change fields of a memory; new content is re-embedded."""
        p.require("write", ns)
        values: dict[str, Any] = {}
        for name in patch.model_fields_set:
            value = getattr(patch, name)
            values["metadata_" if name == "metadata" else name] = getattr(value, "value", value)
        if patch.content is not None:
            values["embedding"] = (await self._embed([patch.content]))[0]
            values["embedding_model"] = self._embedder.model_id
            values["content_hash"] = content_hash(patch.content)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            namespace = await self._namespace(tx, p, ns)
            current = await memories_repo.get(tx.session, p.tenant_id, namespace.id, memory_id)
            if current is None:
                raise MemoryNotFound(f"No memory {memory_id} in namespace '{ns}'.")
            vf = values.get("valid_from", current.valid_from)
            vt = values.get("valid_to", current.valid_to)
            if vf is not None and vt is not None and vt < vf:
                raise InvalidInput("valid_to must not be before valid_from", extra={"field": "valid_to"})
            m = await memories_repo.update_fields(tx.session, p.tenant_id, namespace.id, memory_id, values)
            assert m is not None
            await audit.record(
                tx.session,
                p.tenant_id,
                p.subject,
                "memory.update",
                namespace_id=namespace.id,
                target_id=str(memory_id),
                detail={"fields": sorted(patch.model_fields_set)},
            )
        return memory_out(m, ns)

    async def delete_memory(self, p: Principal, ns: str, memory_id: uuid.UUID) -> None:
        """Delete a memory permanently."""
        p.require("write", ns)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            namespace = await self._namespace(tx, p, ns)
            if not await memories_repo.remove(tx.session, p.tenant_id, namespace.id, memory_id):
                raise MemoryNotFound(f"No memory {memory_id} in namespace '{ns}'.")
            await audit.record(
                tx.session, p.tenant_id, p.subject, "memory.delete", namespace_id=namespace.id, target_id=str(memory_id)
            )

    # ---- search ---------------------------------------------------------------------------

    async def search(self, p: Principal, ns: str, req: SearchIn) -> SearchOut:
        """Hybrid search: meaning (vectors) and words (full text), fused by reciprocal rank."""
        p.require("read", ns)
        failures: list[str] = []
        started = time.perf_counter()
        try:
            qvec: list[float] | None = await self._embedder.embed_query(req.query)
        except EmbeddingUnavailable:
            log.warning("query embedding failed; serving lexical results only", exc_info=True)
            qvec, failures = None, ["embedding"]
        embed_ms = (time.perf_counter() - started) * 1000
        async with self._db.tenant_tx(p.tenant_id) as tx:
            namespace = await self._namespace(tx, p, ns)
            outcome = await hybrid_search(
                tx.session,
                tenant_id=p.tenant_id,
                namespace_id=namespace.id,
                query=req.query,
                query_vector=qvec,
                model_id=self._embedder.model_id,
                filters=req.filters,
                limit=req.limit,
                candidates=max(50, req.limit * 5),
            )
            hits = outcome.hits
            min_score_applied = req.min_score is not None and qvec is not None
            if min_score_applied:
                hits = [h for h in hits if (h.semantic_relevance or 0.0) >= req.min_score]  # type: ignore[operator]
            await memories_repo.touch(tx.session, p.tenant_id, [h.memory.id for h in hits])
        return SearchOut(
            results=[
                SearchResult(
                    score=h.score,
                    semantic_relevance=h.semantic_relevance,
                    signals=Signals(
                        dense_rank=h.dense_rank, lexical_rank=h.lexical_rank, lexical_score=h.lexical_score
                    ),
                    memory=memory_out(h.memory, ns),
                )
                for h in hits
            ],
            metrics=SearchMetrics(
                timings_ms={
                    "embed": round(embed_ms, 2),
                    **outcome.timings_ms,
                    "total": round((time.perf_counter() - started) * 1000, 2),
                },
                matched_by=outcome.matched_by,
                backend_failures=failures + outcome.backend_failures,
                min_score_applied=min_score_applied,
            ),
        )

    # ---- status ---------------------------------------------------------------------------

    async def health(self) -> Health:
        redis_ok: bool | None = None
        if self._redis is not None:
            try:
                redis_ok = bool(await self._redis.ping())
            except Exception:
                redis_ok = False
        return Health(
            version=__version__,
            database=await self._db.ping(),
            redis=redis_ok,
            embedding_model=self._embedder.model_id,
            embedded_database=self._db.urls.embedded,
        )

    async def tenant_summary(self, p: Principal) -> dict[str, Any]:
        namespaces = await self.list_namespaces(p)
        return {
            "tenant_id": str(p.tenant_id),
            "subject": p.subject,
            "scopes": sorted(p.scopes),
            "namespaces": [n.name for n in namespaces],
            "memories": sum(n.memory_count or 0 for n in namespaces),
        }
