"""NamespaceAPI: the one entry point that REST, MCP, jobs and the CLI call.

Every method takes the caller's Principal first, checks its scope, opens a tenant transaction
(RLS-bound), does the work through the capability repositories, records an audit entry for
changes, and returns API schemas. Nothing else opens tenant transactions.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from memvault import __version__
from memvault.audit import repository as audit
from memvault.audit.schemas import AuditEntryOut, AuditPage
from memvault.db.session import TenantTx
from memvault.embeddings import EmbeddingUnavailable
from memvault.entities.service import EntityOps
from memvault.errors import Conflict, InvalidInput, NotFound, Unauthenticated
from memvault.events.service import EventOps
from memvault.extraction.service import ExtractionOps
from memvault.facade import FacadeBase, NamespaceNotFound
from memvault.forget.service import ForgetOps
from memvault.idempotency.service import IdempotencyOps
from memvault.jobs.service import JobOps
from memvault.keys import repository as keys_repo
from memvault.keys import tokens
from memvault.keys.schemas import KeyCreated, KeyIn, KeyOut
from memvault.maintenance.service import MaintenanceOps
from memvault.memories.models import Memory
from memvault.memories.schemas import MemoryFilters
from memvault.memories.service import MemoryOps, memory_out
from memvault.namespaces import repository as ns_repo
from memvault.namespaces.models import Namespace
from memvault.namespaces.schemas import NamespaceIn, NamespaceOut, NamespacePatch, NamespaceSettings, SearchSettings
from memvault.oauth.accounts import AccountOps
from memvault.oauth.service import OAuthOps
from memvault.observability import metrics
from memvault.portability.service import PortabilityOps
from memvault.principal import OPERATOR, Principal
from memvault.retrieval.chain import owner_read
from memvault.retrieval.context import ContextIn, ContextOut, pack
from memvault.retrieval.cues import QueryCues, analyse
from memvault.retrieval.hybrid import (
    Hit,
    NamedEntities,
    hybrid_search,
    matched_by,
    neighbours_of,
    search_preamble,
    search_settings,
)
from memvault.retrieval.lexical import TermStats
from memvault.retrieval.schemas import (
    DEFAULT_FUSION,
    ChannelSignal,
    SearchIn,
    SearchMetrics,
    SearchOut,
    SearchResult,
    Signals,
)
from memvault.retrieval.stages import SecondStage
from memvault.tenants import service as tenants_service
from memvault.traces.service import TraceOps

log = logging.getLogger(__name__)


def _consume(task: asyncio.Future[Any]) -> None:
    """Take the outcome of a task nobody awaits any more, so that asyncio does not report it as
    never retrieved; an unexpected error is logged instead."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.warning("abandoned query embedding failed: %r", exc)


# A key's last-used time is written at most this often, so reads do not each cost a write.
LAST_USED_RESOLUTION = timedelta(seconds=60)


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


def namespace_out(ns: Namespace, memory_count: int) -> NamespaceOut:
    return NamespaceOut(
        id=ns.id,
        name=ns.name,
        description=ns.description,
        created_at=ns.created_at,
        memory_count=memory_count,
        settings=NamespaceSettings.model_validate(ns.settings or {}),
    )


@dataclass(frozen=True)
class Health:
    version: str
    database: bool
    redis: bool | None
    embedding_model: str
    embedded_database: bool


class NamespaceAPI(
    MemoryOps,
    EntityOps,
    EventOps,
    TraceOps,
    ForgetOps,
    PortabilityOps,
    IdempotencyOps,
    JobOps,
    ExtractionOps,
    MaintenanceOps,
    OAuthOps,
    AccountOps,
    FacadeBase,
):
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

    async def update_namespace(self, p: Principal, name: str, patch: NamespacePatch) -> NamespaceOut:
        """Change a namespace's description or settings (search defaults, periodic maintenance)."""
        p.require("admin", name)
        given = patch.model_fields_set
        async with self._db.tenant_tx(p.tenant_id) as tx:
            ns = await self._namespace(tx, p, name)
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
            await tx.session.flush()
            await audit.record(
                tx.session,
                p.tenant_id,
                p.subject,
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

    async def create_key(self, p: Principal, body: KeyIn, *, operator: bool = False) -> KeyCreated:
        """Create an API key. The key is in the response once and never again. ``operator`` (CLI
        only) adds the scope that writes system-wide memories."""
        p.require_reach("admin", body.namespaces)
        if operator:
            p.require(OPERATOR)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            row, raw = await keys_repo.create(
                tx.session,
                p.tenant_id,
                name=body.name,
                scopes=[*body.scopes, OPERATOR] if operator else body.scopes,
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
            # Raised inside the transaction, so the revocation rolls back.
            p.require_reach("admin", row.namespaces)
            await audit.record(tx.session, p.tenant_id, p.subject, "key.revoke", target_id=str(key_id))
        return KeyOut.model_validate(row)

    # ---- audit ----------------------------------------------------------------------------

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

    # ---- search ---------------------------------------------------------------------------

    async def search(self, p: Principal, ns: str, req: SearchIn) -> SearchOut:
        """Hybrid search: meaning (vectors) and words (full text) retrieve candidates; recency,
        importance, access, intent and time cues rank them too; weighted reciprocal rank fuses it all."""
        p.require("read", ns)
        failures: list[str] = []
        started = time.perf_counter()
        second = SecondStage(
            self._reranker, self._rewriter, self._settings.rerank_candidates, rerank=req.rerank, rewrite=req.rewrite
        )
        # The query is embedded on a thread while the database reads what the search needs before
        # its statement (the namespace, the query's words and their counts): neither waits for the
        # other (docs/benchmarks.md, "... the embedding beside the preamble"). A rewrite asks a
        # remote model, and no transaction stays open for that: it is waited for first.
        embedding = asyncio.ensure_future(self._dense_vector(req.query, second))
        candidates = max(50, req.limit * 5)
        bm25 = self._settings.search_lexical == "bm25"
        # One plan per connection for an unfiltered search, a plan per call for a filtered one, key
        # lookups priced for data in memory (retrieval/hybrid.py, search_settings).
        settings = search_settings(req.filters, candidates)
        try:
            if second.rewriting:
                await asyncio.wait({embedding})
            async with self._db.tenant_tx(p.tenant_id, settings=settings) as tx:
                # The namespace, the model probe, the query's words and the entities it names in one
                # round trip. Entities are looked for unless the request turns the graph channel off
                # (a namespace's own weights are only known from this same row).
                pre = await search_preamble(
                    tx.session,
                    tenant_id=p.tenant_id,
                    namespace=ns,
                    query=req.query,
                    model_id=self._embedder.model_id,
                    bm25=bm25,
                    graph=(req.weights or {}).get("graph") != 0,
                    at=req.reference_time or datetime.now(UTC),
                )
                if pre is None:
                    raise NamespaceNotFound(f"No namespace named '{ns}'.")
                namespace_id, lexemes = pre.namespace_id, pre.lexemes
                terms = None
                if bm25:
                    terms = await self._term_stats.stats(tx.session, p.tenant_id, namespace_id, sorted(lexemes))
                    self._refresh_term_stats(p.tenant_id, namespace_id)
                # Reading as a user or in a session: how the lexical channel finds the reader's
                # words depends on how many memories the reader sees (retrieval/chain.py).
                small_chain = (
                    bm25
                    and owner_read(req.filters)
                    and await self._chains.small(tx.session, p.tenant_id, namespace_id, req.filters)
                )
                qvec, embed_ms = await embedding
                if qvec is None:
                    failures.append("embedding")
                # Rows of another model are invisible to the dense channel until re-embedded: say so.
                elif pre.other_model:
                    failures.append("embedding_model_mismatch")
                cues = analyse(req.query, req.reference_time)
                defaults = NamespaceSettings.model_validate(pre.settings).search or SearchSettings()
                weights = req.effective_weights(defaults.weights)
                entities = pre.entities if weights.get("graph", 0) > 0 else NamedEntities()
                outcome = await hybrid_search(
                    tx.session,
                    tenant_id=p.tenant_id,
                    namespace_id=namespace_id,
                    query=req.query,
                    query_vector=qvec,
                    model_id=self._embedder.model_id,
                    filters=req.filters,
                    limit=second.fetch(req.limit),
                    candidates=candidates,
                    head=max(10, req.limit),
                    weights=weights,
                    fusion=req.fusion or defaults.fusion or DEFAULT_FUSION,
                    cues=cues,
                    entities=entities,
                    reference_time=req.reference_time,
                    half_life_days=self._settings.search_recency_half_life_days,
                    strength_half_life_days=self._settings.decay_half_life_days,
                    terms=terms,
                    settings_set=True,
                    small_chain=small_chain,
                )
                hits = outcome.hits
                min_score_applied = req.min_score is not None and qvec is not None
                if min_score_applied:
                    hits = [h for h in hits if (h.semantic_relevance or 0.0) >= req.min_score]  # type: ignore[operator]
                reranking = second.reranking and bool(hits)
                neighbours: dict[uuid.UUID, list[Memory]] = {}
                neighbours_ms = 0.0
                if not reranking:
                    hits = hits[: req.limit]
                    neighbours, neighbours_ms = await self._neighbours(tx, namespace_id, req, hits)
            if reranking:
                # The reranker may be a remote call of up to its timeout: no transaction waits on
                # it. The neighbours of the reranked hits come from a transaction of their own.
                hits = await second.rerank_hits(req.query, hits, req.limit)
                if req.neighbours:
                    async with self._db.tenant_tx(p.tenant_id) as tx:
                        neighbours, neighbours_ms = await self._neighbours(tx, namespace_id, req, hits)
        finally:
            # Gone before the embedding (no such namespace, a database error): the thread still
            # finishes and caches its vector; nobody waits for it, and its outcome is consumed.
            embedding.add_done_callback(_consume)
        self._accesses.record(p.tenant_id, [h.memory.id for h in hits])
        out = SearchOut(
            results=[
                SearchResult(
                    score=h.score,
                    semantic_relevance=h.semantic_relevance,
                    signals=Signals(
                        dense_rank=h.dense_rank,
                        lexical_rank=h.lexical_rank,
                        lexical_score=h.lexical_score,
                        channels={k: ChannelSignal(rank=r, value=v) for k, (r, v) in h.channels.items()},
                    ),
                    memory=memory_out(h.memory, ns),
                    neighbours=[memory_out(m, ns) for m in neighbours[h.memory.id]] if req.neighbours else None,
                )
                for h in hits
            ],
            metrics=SearchMetrics(
                timings_ms={
                    "embed": round(embed_ms, 2),
                    **outcome.timings_ms,
                    **({"neighbours": round(neighbours_ms, 2)} if req.neighbours else {}),
                    **second.timings_ms,
                    "total": round((time.perf_counter() - started) * 1000, 2),
                },
                matched_by=matched_by(hits),
                backend_failures=failures + outcome.backend_failures + second.failures,
                min_score_applied=min_score_applied,
                candidates=outcome.candidates,
                weights=outcome.weights,
                fusion=outcome.fusion,
                cues={**cues.describe(), **({"entities": ", ".join(entities.names)} if entities.names else {})},
                stages=second.stages,
            ),
        )
        metrics.observe_search(out.metrics.timings_ms, out.metrics.backend_failures)
        return out

    async def warm_search(self) -> int:
        """Build, compile and run once each statement a default search can take (an intent, named
        entities, each kind of time cue, query words the namespace has: there or not), unfiltered
        and reading as a user (whose scope chain is small or not), in a transaction no row is
        visible to: otherwise a process's first search of each kind pays 25-40 ms of Python for
        it (docs/benchmarks.md). Returns how many ran; never raises."""
        now = datetime.now(UTC)
        # (order, window): no time cue, a window ("in March"), the newest, the oldest.
        times = [(None, None), (None, (now - timedelta(days=1), now)), ("newest", None), ("oldest", None)]
        ran = 0
        try:
            # Reading as a user is how an application serving many users searches: every call,
            # with a scope chain small or not (retrieval/chain.py).
            user = MemoryFilters(user_id="warm")
            for filters, small_chain in ((None, False), (user, False), (user, True)):
                async with self._db.tenant_tx(uuid.uuid4(), settings=search_settings(filters, 50)) as tx:
                    for rare, intent, graph, (order, window) in itertools.product(
                        (True, False), (None, "preference"), (False, True), times
                    ):
                        await hybrid_search(
                            tx.session,
                            tenant_id=tx.tenant_id,
                            namespace_id=uuid.uuid4(),
                            query="warm",
                            query_vector=[0.0] * self._embedder.dim,
                            model_id=self._embedder.model_id,
                            filters=filters,
                            limit=10,
                            candidates=50,
                            weights=SearchIn(query="warm").effective_weights(),
                            fusion=DEFAULT_FUSION,
                            cues=QueryCues(intent=intent, order=order, window=window),
                            entities=NamedEntities(named=(uuid.uuid4(),), names=("warm",)) if graph else None,
                            terms=TermStats(n=1, avg_len=1.0, df={"warm": 1 if rare else 0}),
                            settings_set=True,
                            small_chain=small_chain,
                        )
                        ran += 1
        except Exception:
            log.warning("could not prepare the search statements; each is built at its first search", exc_info=True)
        return ran

    async def _neighbours(
        self, tx: TenantTx, namespace_id: uuid.UUID, req: SearchIn, hits: list[Hit]
    ) -> tuple[dict[uuid.UUID, list[Memory]], float]:
        """The session neighbours the request asks for around each hit, and the milliseconds that took."""
        started = time.perf_counter()
        if not req.neighbours:
            return {}, 0.0
        found = await neighbours_of(
            tx.session,
            tenant_id=tx.tenant_id,
            namespace_id=namespace_id,
            filters=req.filters,
            memories=[h.memory for h in hits],
            n=req.neighbours,
        )
        return found, (time.perf_counter() - started) * 1000

    async def _dense_vector(self, query: str, second: SecondStage) -> tuple[list[float] | None, float]:
        """The dense channel's vector, None when the embedder fails (the search goes on with words
        only), and the milliseconds the embedding took. With a rewrite, the mean of the query's
        and a hypothetical answer's vectors: the lexical channel keeps the user's words."""
        started = time.perf_counter()
        try:
            vector: list[float] | None = await self._embedder.embed_query(query)
        except EmbeddingUnavailable:
            log.warning("query embedding failed; serving lexical results only", exc_info=True)
            return None, (time.perf_counter() - started) * 1000
        embed_ms = (time.perf_counter() - started) * 1000
        return await second.query_vector(query, vector, self._embedder), embed_ms

    async def get_context(self, p: Principal, ns: str, req: ContextIn) -> ContextOut:
        """A prompt-ready markdown block of what is remembered for a query and/or a session or
        user, packed by rank into a token budget."""
        p.require("read", ns)
        base = req.filters or MemoryFilters()
        reader = base.model_copy(
            update={"user_id": req.user_id or base.user_id, "session_id": req.session_id or base.session_id}
        )
        if req.query:
            found = await self.search(p, ns, SearchIn(query=req.query, limit=req.limit, filters=reader))
            ranked = [r.memory for r in found.results]
        else:
            ranked = (await self.list_memories(p, ns, reader, limit=req.limit)).data
        return pack(ranked, req.token_budget)

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
