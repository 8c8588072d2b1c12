"""The facade's search: ``NamespaceAPI.search``, ``get_context`` and the start-up warm-up.

Each request becomes one ``SearchPlan`` (retrieval/plan.py), read in the search's own tenant
transaction together with what it needs of the namespace; ``hybrid.hybrid_search`` answers it
with hits. Around that first stage sit the query embedding (on a thread, beside the database's
work), the optional second stage (a rewrite before, a reranker after: retrieval/stages.py) and
the session neighbours a request asks to see."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, cast

from memvault.contradictions.repository import open_against
from memvault.db.session import TenantTx
from memvault.embeddings import EmbeddingUnavailable
from memvault.entities import repository as entities_repo
from memvault.errors import InvalidInput
from memvault.facade import FacadeBase, NamespaceNotFound
from memvault.memories.models import Memory
from memvault.memories.schemas import MemoryFilters
from memvault.memories.service import memory_out
from memvault.namespaces.schemas import NamespaceSettings, SearchSettings
from memvault.observability import metrics
from memvault.operations import operation
from memvault.principal import Principal
from memvault.retrieval.chain import owner_read
from memvault.retrieval.context import (
    ContextIn,
    ContextOut,
    assemble,
    estimate_tokens,
    kind_lines,
    observation_block,
    pack,
)
from memvault.retrieval.cues import QueryCues, analyse
from memvault.retrieval.hits import Hit, matched_by
from memvault.retrieval.hops import HopPath, entity_hops
from memvault.retrieval.hybrid import hybrid_search
from memvault.retrieval.kinds import MESSAGE_CHARS, EntityHit, Kind, MessageHit, TraceHit
from memvault.retrieval.lexical import TermStats
from memvault.retrieval.plan import NamedEntities, SearchPlan
from memvault.retrieval.schemas import (
    DEFAULT_FUSION,
    ChannelSignal,
    HopSignal,
    SearchIn,
    SearchMetrics,
    SearchOut,
    SearchResult,
    Signals,
)
from memvault.retrieval.sql import kinds as kinds_sql
from memvault.retrieval.sql.neighbours import neighbours_of
from memvault.retrieval.sql.preamble import search_preamble
from memvault.retrieval.sql.settings import search_settings
from memvault.retrieval.stages import SecondStage

if TYPE_CHECKING:
    from memvault.api import NamespaceAPI

log = logging.getLogger(__name__)

Embedding = asyncio.Future[tuple[list[float] | None, float]]


def _consume(task: asyncio.Future[Any]) -> None:
    """Take the outcome of a task nobody awaits any more, so that asyncio does not report it as
    never retrieved; an unexpected error is logged instead."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.warning("abandoned query embedding failed: %r", exc)


def neighbourhood(h: Hit, *, inferred: bool) -> Literal["session", "inferred"] | None:
    """How the context channel and ``neighbours`` found the hit's conversation: its session id, or
    inferred (an event without one: the same owner's session-less events close in time, sql/inferred.py);
    None when neither applies or the channel did not run."""
    if "context" not in h.channels:
        return None
    if h.memory.session_id is not None:
        return "session"
    alone = h.memory.namespace_id is not None and h.memory.type == "event"
    return "inferred" if inferred and alone else None


def _results(
    hits: list[Hit],
    ns: str,
    req: SearchIn,
    neighbours: dict[uuid.UUID, list[Memory]],
    contradicted: dict[uuid.UUID, list[uuid.UUID]],
    paths: dict[uuid.UUID, HopPath],
    *,
    inferred: bool,
) -> list[SearchResult]:
    return [
        SearchResult(
            score=h.score,
            semantic_relevance=h.semantic_relevance,
            signals=Signals(
                dense_rank=h.dense_rank,
                lexical_rank=h.lexical_rank,
                lexical_score=h.lexical_score,
                channels={k: ChannelSignal(rank=r, value=v) for k, (r, v) in h.channels.items()},
                hop=_hop_signal(paths.get(h.memory.id)),
                neighbourhood=neighbourhood(h, inferred=inferred),
            ),
            memory=memory_out(h.memory, ns),
            neighbours=[memory_out(m, ns) for m in neighbours[h.memory.id]] if req.neighbours else None,
            contradicted_by=contradicted.get(h.memory.id, []),
        )
        for h in hits
    ]


def _hop_signal(path: HopPath | None) -> HopSignal | None:
    if path is None:
        return None
    return HopSignal(from_memory=path.seed, entity_id=path.entity_id, entity=path.entity)


class SearchOps(FacadeBase):
    @operation("search")
    async def search(self, p: Principal, ns: str, req: SearchIn) -> SearchOut:
        """Hybrid search: meaning (vectors) and words (full text) retrieve candidates; recency,
        importance, access, intent and time cues rank them too; weighted reciprocal rank fuses it all."""
        p.require("read", ns)
        if req.entity is not None or (req.filters is not None and req.filters.entity_id is not None):
            req = await self._entity_filter(p, ns, req)
        if req.kinds != [Kind.memories]:
            return await self._search_kinds(p, ns, req)
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
        # One plan per connection for an unfiltered search, a plan per call for a filtered one, key
        # lookups priced for data in memory (retrieval/sql/settings.py, search_settings).
        settings = search_settings(req.filters, candidates)
        try:
            if second.rewriting:
                await asyncio.wait({embedding})
            async with self._db.tenant_tx(p.tenant_id, settings=settings) as tx:
                plan, embed_ms = await self._plan(tx, ns, req, second, embedding, candidates, failures)
                outcome = await hybrid_search(tx.session, plan)
                hits = outcome.hits
                min_score_applied = req.min_score is not None and plan.query_vector is not None
                if min_score_applied:
                    hits = [h for h in hits if (h.semantic_relevance or 0.0) >= req.min_score]  # type: ignore[operator]
                reranking = second.reranking and bool(hits)
                paths: dict[uuid.UUID, HopPath] = {}
                hops_ms = 0.0
                if req.hops:
                    # Within the same transaction and read rules; before the cut to the limit
                    # (or the reranker, which then orders the reached memories with the rest).
                    hopped = await entity_hops(tx.session, plan, hits, len(hits) if reranking else req.limit)
                    hits, paths, hops_ms = hopped.hits, hopped.paths, hopped.ms
                    second.stages["hops"] = hopped.stage
                neighbours: dict[uuid.UUID, list[Memory]] = {}
                neighbours_ms = 0.0
                if not reranking:
                    hits = hits[: req.limit]
                    neighbours, neighbours_ms = await self._neighbours(tx, plan, req, hits)
                # Open contradictions of the hits (a reranked list is drawn from these), in the same
                # transaction: one indexed lookup.
                reader = req.filters or MemoryFilters()
                contradicted = await open_against(
                    tx.session,
                    tx.tenant_id,
                    [h.memory.id for h in hits],
                    user_id=reader.user_id,
                    session_id=reader.session_id,
                )
            if reranking:
                # The reranker may be a remote call of up to its timeout: no transaction waits on
                # it. The neighbours of the reranked hits come from a transaction of their own.
                hits = await second.rerank_hits(req.query, hits, req.limit)
                if req.neighbours:
                    async with self._db.tenant_tx(p.tenant_id) as tx:
                        neighbours, neighbours_ms = await self._neighbours(tx, plan, req, hits)
        finally:
            # Gone before the embedding (no such namespace, a database error): the thread still
            # finishes and caches its vector; nobody waits for it, and its outcome is consumed.
            embedding.add_done_callback(_consume)
        self._accesses.record(p.tenant_id, [h.memory.id for h in hits])
        entities = plan.entities or NamedEntities()
        out = SearchOut(
            results=_results(hits, ns, req, neighbours, contradicted, paths, inferred=plan.session_gap_minutes > 0),
            metrics=SearchMetrics(
                timings_ms={
                    "embed": round(embed_ms, 2),
                    **outcome.timings_ms,
                    **({"hops": round(hops_ms, 2)} if req.hops else {}),
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
                cues={
                    **(plan.cues or QueryCues()).describe(),
                    **outcome.cues,
                    **({"entities": ", ".join(entities.names)} if entities.names else {}),
                },
                stages=second.stages,
            ),
        )
        metrics.observe_search(out.metrics.timings_ms, out.metrics.backend_failures)
        return out

    async def _entity_filter(self, p: Principal, ns: str, req: SearchIn) -> SearchIn:
        """The request with its entity, named or given by id, checked and resolved to its id: an
        entity that is not in the namespace is an error rather than an empty answer, so a typo in a
        name is not mistaken for "nothing is known about it"."""
        filters = req.filters or MemoryFilters()
        async with self._open(p, ns, scope=None) as (tx, namespace):
            if req.entity is not None:
                found = await entities_repo.resolve(tx.session, p.tenant_id, namespace.id, req.entity, field="entity")
                if filters.entity_id is not None and filters.entity_id != found.id:
                    raise InvalidInput(
                        f"entity '{req.entity}' is not entity {filters.entity_id}; give one of them",
                        extra={"field": "entity"},
                    )
            else:
                assert filters.entity_id is not None
                found = await entities_repo.resolve(
                    tx.session, p.tenant_id, namespace.id, filters.entity_id, field="entity_id"
                )
        return req.model_copy(update={"entity": None, "filters": filters.model_copy(update={"entity_id": found.id})})

    async def _plan(
        self,
        tx: TenantTx,
        ns: str,
        req: SearchIn,
        second: SecondStage,
        embedding: Embedding,
        candidates: int,
        failures: list[str],
    ) -> tuple[SearchPlan, float]:
        """The first stage's plan for ``req`` in namespace ``ns``, and the milliseconds the query's
        embedding took. A failed embedding or a model mismatch is added to ``failures``."""
        bm25 = self._settings.search_lexical == "bm25"
        # The namespace, the model probe, the query's words and the entities it names in one round
        # trip. Entities are looked for unless the request turns the graph channel off (a
        # namespace's own weights are only known from this same row).
        pre = await search_preamble(
            tx.session,
            tenant_id=tx.tenant_id,
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
        # Reading as a user or in a session: how the lexical channel finds the reader's words, and
        # what it weighs them by, depends on how many memories the reader sees (retrieval/chain.py).
        small_chain = (
            bm25
            and req.filters is not None  # owner_read says so too; this tells the type checker
            and owner_read(req.filters)
            and await self._chains.small(tx.session, tx.tenant_id, namespace_id, req.filters)
        )
        terms = None
        if small_chain and req.filters is not None:
            terms = await self._chains.terms(tx.session, tx.tenant_id, namespace_id, req.filters, sorted(lexemes))
        elif bm25:
            terms = await self._term_stats.stats(tx.session, tx.tenant_id, namespace_id, sorted(lexemes))
            self._refresh_term_stats(tx.tenant_id, namespace_id)
        qvec, embed_ms = await embedding
        if qvec is None:
            failures.append("embedding")
        # Rows of another model are invisible to the dense channel until re-embedded: say so.
        elif pre.other_model:
            failures.append("embedding_model_mismatch")
        defaults = NamespaceSettings.model_validate(pre.settings).search or SearchSettings()
        weights = req.effective_weights(defaults.weights)
        plan = SearchPlan(
            tenant_id=tx.tenant_id,
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
            cues=analyse(req.query, req.reference_time),
            entities=pre.entities if weights.get("graph", 0) > 0 else NamedEntities(),
            terms=terms,
            reference_time=req.reference_time,
            half_life_days=self._settings.search_recency_half_life_days,
            strength_half_life_days=self._settings.decay_half_life_days,
            small_chain=small_chain,
            settings_set=True,
            session_gap_minutes=(
                defaults.session_gap_minutes
                if defaults.session_gap_minutes is not None
                else self._settings.search_session_gap_minutes
            ),
        )
        return plan, embed_ms

    async def warm_search(self) -> int:
        """Build, compile and run once each statement a default search can take (an intent, named
        entities, each kind of time cue, query words the namespace has: there or not), unfiltered
        and reading as a user (whose scope chain is small or not), in a transaction no row is
        visible to: otherwise a process's first search of each kind pays 25-40 ms of Python for
        it (docs/benchmarks.md). Returns how many ran; never raises."""
        now = datetime.now(UTC)
        # (order, window): no time cue, a window ("in March"), the newest, the oldest.
        times: list[tuple[Literal["newest", "oldest"] | None, tuple[datetime, datetime] | None]] = [
            (None, None),
            (None, (now - timedelta(days=1), now)),
            ("newest", None),
            ("oldest", None),
        ]
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
                        plan = SearchPlan(
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
                            session_gap_minutes=self._settings.search_session_gap_minutes,
                        )
                        await hybrid_search(tx.session, plan)
                        ran += 1
        except Exception:
            log.warning("could not prepare the search statements; each is built at its first search", exc_info=True)
        return ran

    async def _neighbours(
        self, tx: TenantTx, plan: SearchPlan, req: SearchIn, hits: list[Hit]
    ) -> tuple[dict[uuid.UUID, list[Memory]], float]:
        """The session neighbours the request asks for around each hit (in its inferred
        conversation for one without a session id), and the milliseconds that took."""
        started = time.perf_counter()
        if not req.neighbours:
            return {}, 0.0
        found = await neighbours_of(
            tx.session,
            tenant_id=tx.tenant_id,
            namespace_id=plan.namespace_id,
            filters=req.filters,
            memories=[h.memory for h in hits],
            n=req.neighbours,
            gap_minutes=plan.session_gap_minutes,
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

    @operation("search")
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
            ranked = (await cast("NamespaceAPI", self).list_memories(p, ns, reader, limit=req.limit)).data
        if req.session_id is None and req.kinds == [Kind.memories]:
            return pack(ranked, req.token_budget)
        # The session's observation heads the block; other kinds follow the memories.
        observation = None
        if req.session_id is not None:
            noted = await cast("NamespaceAPI", self)._session_observation(p, ns, req.session_id)
            observation = observation_block(noted, req.token_budget) if noted is not None else None
        if req.query and req.kinds != [Kind.memories]:
            hits = await self._kind_hits(p, ns, req.query, reader, req.kinds, req.limit)
        else:
            hits = {k.value: [] for k in req.kinds if k != Kind.memories}
        room = req.token_budget - (estimate_tokens(observation) + 1 if observation else 0)
        packed = pack(ranked, max(room, 1)).model_copy(update=hits)
        return assemble(observation, packed, kind_lines(hits), req.token_budget)

    async def _search_kinds(self, p: Principal, ns: str, req: SearchIn) -> SearchOut:
        """A search with ``kinds`` beyond memories: the memory search as ever if memories are asked
        for, and each other kind's list beside it."""
        started = time.perf_counter()
        if Kind.memories in req.kinds:
            out = await self.search(p, ns, req.model_copy(update={"kinds": [Kind.memories]}))
        else:
            out = SearchOut(
                results=[],
                metrics=SearchMetrics(timings_ms={}, matched_by={}, backend_failures=[], min_score_applied=False),
            )
        hits = await self._kind_hits(p, ns, req.query, req.filters, req.kinds, req.limit)
        out = out.model_copy(update=hits)
        out.metrics.timings_ms["kinds"] = round((time.perf_counter() - started) * 1000, 2)
        return out

    async def _kind_hits(
        self, p: Principal, ns: str, query: str, filters: MemoryFilters | None, kinds: list[Kind], limit: int
    ) -> dict[str, Any]:
        """The ``messages``, ``traces`` and ``entities`` lists a search or context asked for."""
        out: dict[str, Any] = {}
        async with self._open(p, ns, "read") as (tx, namespace):
            if Kind.messages in kinds:
                found = await kinds_sql.messages(
                    tx.session, p.tenant_id, namespace.id, query, filters, limit, reader=p.reader
                )
                out["messages"] = [
                    MessageHit(
                        id=e.id,
                        session_id=e.session_id,
                        role=e.role,
                        content=e.content[:MESSAGE_CHARS],
                        timestamp=e.occurred_at,
                        score=round(score, 4),
                    )
                    for e, score in found
                ]
            if Kind.traces in kinds:
                traced = await kinds_sql.traces(
                    tx.session, p.tenant_id, namespace.id, query, filters, limit, reader=p.reader
                )
                out["traces"] = [
                    TraceHit(id=t.id, task=t.task, outcome=t.outcome, success=t.success, score=round(score, 4))
                    for t, score in traced
                ]
            if Kind.entities in kinds:
                named = await kinds_sql.entities(tx.session, p.tenant_id, namespace.id, query, limit)
                out["entities"] = [
                    EntityHit(id=e.id, name=e.name, type=e.type, score=round(score, 4)) for e, score in named
                ]
        return out
