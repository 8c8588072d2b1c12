"""Hybrid search: dense (pgvector HNSW, cosine) and lexical (full text) candidates, ranked again by
signals (recency, importance, access, strength, intent match, entities named, time cues) and fused
by weighted reciprocal rank or weighted relative scores, all in one SQL statement inside the
caller's tenant transaction.

``candidates -> signals -> fusion -> results with explanations and metrics``. Signals only rank
the candidates that retrieval found: they reorder, they never add or remove a result.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    DateTime,
    Float,
    Integer,
    Text,
    and_,
    any_,
    bindparam,
    case,
    cast,
    false,
    func,
    literal,
    literal_column,
    null,
    or_,
    select,
    true,
    tuple_,
    union,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY, TSQUERY
from sqlalchemy.dialects.postgresql import UUID as PG_UUID
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer

from memvault.db.session import set_local
from memvault.entities.models import Entity, MemoryEntity, Relation
from memvault.entities.repository import valid_at_condition
from memvault.maintenance import repository as maintenance_repo
from memvault.memories import repository as memories_repo
from memvault.memories.models import Memory
from memvault.memories.schemas import MemoryFilters
from memvault.namespaces.models import Namespace
from memvault.principal import SYSTEM_TENANT_ID
from memvault.retrieval.chain import owner_read
from memvault.retrieval.cues import QueryCues
from memvault.retrieval.lexical import TermStats, lexemes_of, tsquery_text
from memvault.retrieval.schemas import CHANNELS

RRF_K = 60
# Priors are ranked on coarse buckets so that near-equal values tie (rank() gives ties one rank):
# memories stored minutes apart are equally recent at a 30-day half-life, and a prior that cannot
# tell candidates apart adds the same to each instead of reordering them at random.
BUCKETS = 20
LN2 = 0.6931471805599453
# The context channel looks up the session neighbours of each channel's best candidates only:
# on LoCoMo, those of the best 15 find as much evidence as those of all 50 (0.757 against 0.756
# recall@10), and among 100,000 memories more (fewer distractors lent a match), with less than
# half the probes and rows to score (docs/benchmarks.md).
CONTEXT_PROBED = 15


@dataclass
class Hit:
    memory: Memory
    score: float
    semantic_relevance: float | None
    dense_rank: int | None
    lexical_rank: int | None
    lexical_score: float | None
    channels: dict[str, tuple[int | None, float | None]] = field(default_factory=dict)


def matched_by(hits: list[Hit]) -> dict[str, int]:
    """How many of ``hits`` each retrieval channel found. Counted on what a search returns, after
    ``min_score`` and the reranker, which leave fewer than the first stage fetched."""
    return {
        "dense": sum(1 for h in hits if h.dense_rank is not None),
        "lexical": sum(1 for h in hits if h.lexical_rank is not None),
    }


@dataclass
class SearchOutcome:
    hits: list[Hit]
    candidates: dict[str, int] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    fusion: str = "rrf"
    timings_ms: dict[str, float] = field(default_factory=dict)
    backend_failures: list[str] = field(default_factory=list)


def lexical_query(query: Any):  # type: ignore[no-untyped-def]
    """Any of the query's words, not all of them: natural-language questions rarely share every
    word with the memory that answers them. Stop words are dropped by the english parser."""
    return cast(func.replace(cast(func.plainto_tsquery("english", query), Text), "&", "|"), TSQUERY)


def _decay(age_s, half_life_s: Any):  # type: ignore[no-untyped-def]
    # At most MAX_HALF_LIVES: PostgreSQL raises on exp() underflow (a memory dated centuries before
    # the reference time made every search touching it a 500), and 2^-1000 is zero for ranking.
    return func.exp(-LN2 * func.least(func.greatest(age_s, 0.0) / half_life_s, memories_repo.MAX_HALF_LIVES))


def hnsw_settings(candidates: int) -> dict[str, str]:
    """The transaction-local HNSW settings a search for ``candidates`` nearest rows runs with."""
    return {
        # pgvector 0.8: keep scanning the HNSW graph until enough rows pass the filters, instead of
        # returning fewer than asked when the tenant's rows are a small part of the index.
        "hnsw.iterative_scan": "relaxed_order",
        "hnsw.ef_search": str(max(64, candidates)),
    }


def plan_cache_mode(filters: MemoryFilters | None) -> str:
    """How PostgreSQL plans a search transaction's statements. An unfiltered search reads the rows
    whose best access path depends on the tenant's size (the nearest vectors, the word matches)
    through functions that plan each call for their tenant (migrations 0011, 0013); the rest of its
    statement reaches rows by key, so one plan per connection serves every tenant and the search
    skips planning. Filters go inside the nearest-vector scan, whose plan must see their values."""
    return "force_generic_plan" if (filters or MemoryFilters()) == MemoryFilters() else "force_custom_plan"


# PostgreSQL's default of 4 prices a random page read as a spinning disk's. A search reaches its
# candidates by key in data served from memory, and priced at 4 those lookups lost to reading a
# small tenant's rows whole, each paying the row-level security check (migration 0015).
RANDOM_PAGE_COST = "1.1"


def search_settings(filters: MemoryFilters | None, candidates: int) -> dict[str, str]:
    """The transaction-local settings a search runs with, made when its transaction opens."""
    return {
        "plan_cache_mode": plan_cache_mode(filters),
        "random_page_cost": RANDOM_PAGE_COST,
        **hnsw_settings(candidates),
    }


def session_order(model: Any) -> tuple[Any, Any]:
    """A memory's place in its session: valid time, then insertion order (the last two columns of
    the session index, migration 0009)."""
    return memories_repo.date_of(model), model.seq


def _dense_inner(model: Any, where: list[Any], query_vector: Any, model_id: Any, candidates: Any) -> Any:
    dist = model.embedding.cosine_distance(query_vector)
    return (
        select(model.tenant_id, model.id, dist.label("dist"))
        .where(*where, model.embedding_model == model_id, model.embedding.is_not(None))
        .order_by(dist)
        .limit(candidates)
        .subquery("dense_inner")
    )


def _ts_rank_inner(model: Any, where: list[Any], tsq: Any, candidates: Any, *, word_index: bool) -> Any:
    """Full-text candidates ranked by PostgreSQL's ts_rank_cd. The word match runs on the full-text
    index through memvault_word_match (migration 0008): under RLS the planner may not use that
    index for `tsv @@ query` directly."""
    score = func.ts_rank_cd(model.tsv, tsq)
    matched = select(func.memvault_word_match(tsq).table_valued("id").render_derived(name="word_match"))
    return (
        select(model.tenant_id, model.id, score.label("lex_score"))
        .where(*where, model.id.in_(matched) if word_index else true(), model.tsv.op("@@")(tsq))
        .order_by(score.desc())
        .limit(candidates)
        .subquery("lex_inner")
    )


def _fuse(lex_inner: Any, dense_inner: Any | None, rank: Any) -> Any:
    """One row per candidate (``tenant_id``, ``id``) with its rank in each channel (``dense_rank``,
    ``lexical_rank``, ``lex_score``), as a subquery named ``fused``. ``rank`` is the window
    function ranking each channel: rank() keeps ties as ties, row_number() breaks them."""
    lex_ranked = select(
        lex_inner.c.tenant_id,
        lex_inner.c.id,
        cast(literal(None), Integer).label("dense_rank"),
        rank().over(order_by=lex_inner.c.lex_score.desc()).label("lexical_rank"),
        lex_inner.c.lex_score,
    )
    if dense_inner is None:
        return lex_ranked.subquery("fused")
    dense_ranked = select(
        dense_inner.c.tenant_id,
        dense_inner.c.id,
        rank().over(order_by=dense_inner.c.dist).label("dense_rank"),
        cast(literal(None), Integer).label("lexical_rank"),
        cast(literal(None), Float).label("lex_score"),
    )
    # UNION ALL + GROUP BY rather than a FULL JOIN: the fused id stays a plain column, so the
    # joins reach each row by primary key instead of filtering a scan.
    both = union_all(dense_ranked, lex_ranked).subquery("both")
    return (
        select(
            both.c.tenant_id,
            both.c.id,
            func.min(both.c.dense_rank).label("dense_rank"),
            func.min(both.c.lexical_rank).label("lexical_rank"),
            func.max(both.c.lex_score).label("lex_score"),
        )
        .group_by(both.c.tenant_id, both.c.id)
        .subquery("fused")
    )


async def fused_candidates(
    s: AsyncSession,
    model: Any,
    where: list[Any],
    *,
    query: str,
    query_vector: list[float] | None,
    model_id: str,
    candidates: int,
    rank: Any = func.rank,
    word_index: bool = True,
) -> Any:
    """The candidate stage for any table with ``id``, ``tsv``, ``embedding`` and
    ``embedding_model`` (trace search uses it): up to ``candidates`` full-text rows ranked by
    ts_rank_cd and (with a query vector) nearest-vector rows passing ``where``, fused by id (see
    ``_fuse``). Sets the transaction's HNSW settings first."""
    await set_local(s, hnsw_settings(candidates))
    lex_inner = _ts_rank_inner(model, where, lexical_query(query), candidates, word_index=word_index)
    dense_inner = None if query_vector is None else _dense_inner(model, where, query_vector, model_id, candidates)
    return _fuse(lex_inner, dense_inner, rank)


@dataclass(frozen=True)
class NamedEntities:
    """Entities the query names (graph distance 0) and those one relation away (distance 1)."""

    named: tuple[uuid.UUID, ...] = ()
    related: tuple[uuid.UUID, ...] = ()
    names: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.named or self.related)


def query_grams(query: str, longest: int = 4) -> list[str]:
    """Every run of one to ``longest`` words of the query, lower-cased, punctuation as spaces: the
    strings an entity name or alias is compared with."""
    words = re.sub(r"[^\w]+", " ", query.lower()).split()
    return sorted({" ".join(words[i : i + n]) for n in range(1, longest + 1) for i in range(len(words) - n + 1)})


def _normalised_name(col):  # type: ignore[no-untyped-def]
    return func.btrim(func.regexp_replace(func.lower(col), r"[^[:alnum:]_]+", " ", "g"))


def _entity_rows(tenant_id: Any, namespace_id: Any, grams: Any, at: Any) -> Any:
    """The entities said (whose name or an alias is one of ``grams``) and the relations touching
    them: a row per entity with its name, then a row per relation with its two ends and no name.
    ``namespace_id`` may be the column of an enclosing query's namespaces row."""
    alias = func.unnest(Entity.aliases).column_valued("alias")
    said = (
        select(Entity.id, Entity.name)
        .where(
            Entity.tenant_id == tenant_id,
            Entity.namespace_id == namespace_id,
            or_(
                _normalised_name(Entity.name) == any_(grams),
                select(literal(1)).where(_normalised_name(alias) == any_(grams)).exists(),
            ),
        )
        .correlate(Namespace)
        .subquery("said")
    )
    touching = select(said.c.id)
    return union_all(
        select(said.c.id, said.c.name, cast(literal(None), PG_UUID).label("other")),
        select(Relation.source_id, cast(literal(None), Text), Relation.target_id)
        .where(
            Relation.tenant_id == tenant_id,
            Relation.namespace_id == namespace_id,
            or_(Relation.source_id.in_(touching), Relation.target_id.in_(touching)),
            valid_at_condition(at),
        )
        .correlate(Namespace),
    )


def _named_entities(rows: list[list[Any]]) -> NamedEntities:
    """NamedEntities from ``_entity_rows``' rows as JSON arrays: [id, name, other], ids as text."""
    found = [(uuid.UUID(i), name) for i, name, _ in rows if name is not None]
    named = tuple(i for i, _ in found)
    if not named:
        return NamedEntities()
    ends = {uuid.UUID(e) for i, name, other in rows if name is None for e in (i, other)}
    return NamedEntities(named=named, related=tuple(sorted(ends - set(named))), names=tuple(n for _, n in found))


@dataclass(frozen=True)
class Preamble:
    """What a search reads before its statement, in one round trip."""

    namespace_id: uuid.UUID
    settings: dict[str, Any]  # the namespace's own settings
    other_model: bool  # some live memory has no vector of the query's model
    lexemes: list[str]  # the query's words as the full-text index has them
    entities: NamedEntities


@lru_cache(maxsize=8)
def _preamble_statement(dense: bool, bm25: bool, graph: bool) -> Any:
    """The namespace's id and settings by its name, the model probe, the query's lexemes and the
    entities it names as JSON, one statement built once per kind (parameters: tenant_id,
    namespace, model_id, query, grams, at)."""
    tenant_id = bindparam("tenant_id", type_=PG_UUID(as_uuid=True))
    entities: Any = null()
    if graph:
        at = bindparam("at", type_=DateTime(timezone=True))
        rows = _entity_rows(tenant_id, Namespace.id, bindparam("grams", type_=ARRAY(Text)), at).subquery("named")
        entities = select(func.json_agg(func.json_build_array(rows.c.id, rows.c.name, rows.c.other))).scalar_subquery()
    return select(
        Namespace.id,
        Namespace.settings,
        maintenance_repo.other_model_probe(Namespace.id, bindparam("model_id", type_=Text)) if dense else false(),
        lexemes_of(bindparam("query", type_=Text)) if bm25 else null(),
        entities,
    ).where(Namespace.tenant_id == tenant_id, Namespace.name == bindparam("namespace", type_=Text))


async def search_preamble(
    s: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    namespace: str,
    query: str,
    model_id: str | None,
    bm25: bool,
    graph: bool,
    at: datetime,
) -> Preamble | None:
    """The namespace named ``namespace`` (None if there is none) with what the search needs of it:
    whether memories of another model than ``model_id`` hide from the dense channel (not asked
    without a model), the query's lexemes (with ``bm25``), and with ``graph`` the namespace's
    entities the query names as whole words (name or alias) and those related to them by a
    relation valid at ``at``."""
    grams = query_grams(query) if graph else []
    stmt = _preamble_statement(model_id is not None, bm25, bool(grams))
    params = {"tenant_id": tenant_id, "namespace": namespace, "model_id": model_id, "query": query}
    # On the connection, not through the ORM: the row is plain values, and every search pays
    # for the ORM's execution path (docs/benchmarks.md).
    connection = await s.connection()
    row = (await connection.execute(stmt, {**params, "grams": grams, "at": at})).one_or_none()
    if row is None:
        return None
    namespace_id, settings, other_model, lexemes, entities = row
    return Preamble(
        namespace_id=namespace_id,
        settings=settings or {},
        other_model=bool(other_model),
        lexemes=list(lexemes or []),
        entities=_named_entities(entities or []),
    )


@dataclass(frozen=True)
class _Shape:
    """What decides the hybrid statement's SQL; everything else a search varies (tenant,
    namespace, filter values, query vector, words, weights, times, limits, cue values) is a bound
    parameter. Statements are built once per shape (``_statement``): building one costs more
    Python (10-15 ms) than PostgreSQL takes to run it."""

    filters: tuple[str, ...]  # which filters are set (memories.repository.filter_form)
    dense: bool  # a query vector is given
    nearest: bool  # the nearest vectors come from memvault_nearest_keyed (see plan_cache_mode)
    bm25: bool  # the query's term statistics are given (else ts_rank_cd)
    live: bool  # reads live memories only (no knowledge_at, state or include_archived)
    own_words: bool  # a reader's small scope chain: its rows are scored directly (retrieval/chain.py)
    used: tuple[str, ...]  # channels in the fusion
    own: tuple[str, ...]  # channels a neighbour's match is judged on (context)
    fusion: str
    intent: bool
    graph: bool
    time: str | None  # "window", "newest", "oldest"


class _P:
    """The statement's bound parameters, one object each (a name used twice is one parameter).
    The tenant and namespace are the read conditions' own (memories.repository.read_parameters)."""

    tenant_id = bindparam("read_tenant_id", type_=PG_UUID(as_uuid=True))
    namespace_id = bindparam("read_namespace_id", type_=PG_UUID(as_uuid=True))

    query_vector = bindparam("query_vector", type_=Memory.embedding.type)
    model_id = bindparam("model_id", type_=Text)
    candidates = bindparam("candidates", type_=Integer)
    query_text = bindparam("query_text", type_=Text)
    picking = bindparam("picking", type_=Text)
    picking_words = bindparam("picking_words", type_=ARRAY(Text))
    words = bindparam("words", type_=ARRAY(Text))
    lexemes = bindparam("lexemes", type_=ARRAY(Text))
    idf = bindparam("idf", type_=ARRAY(Float))
    avg_len = bindparam("avg_len", type_=Float)
    prefetch = bindparam("prefetch", type_=Integer)
    ref = bindparam("ref", type_=DateTime(timezone=True))
    half_life_s = bindparam("half_life_s", type_=Float)
    strength_half_life_days = bindparam("strength_half_life_days", type_=Float)
    head = bindparam("head", type_=Integer)
    limit = bindparam("limit", type_=Integer)
    intent = bindparam("intent", type_=Text)
    named = bindparam("named", type_=ARRAY(PG_UUID(as_uuid=True)))
    linked = bindparam("linked", type_=ARRAY(PG_UUID(as_uuid=True)))
    window_start = bindparam("window_start", type_=DateTime(timezone=True))
    window_end = bindparam("window_end", type_=DateTime(timezone=True))
    weight = {name: bindparam(f"w_{name}", type_=Float) for name in CHANNELS}


@dataclass(frozen=True)
class _Statement:
    stmt: Any
    rank_key: dict[str, str]  # channel -> the result column with its rank
    value_key: dict[str, str]  # channel -> the result column with its value


def _by_key(tenant_id: Any, memory_id: Any, columns: list[Any], conditions: list[Any], name: str) -> Any:
    """``columns`` of the memory with the primary key (``tenant_id``, ``memory_id``), columns of
    the query it is joined to, if it meets ``conditions``: looked up by that key row by row,
    whatever the statistics say.

    Joined plainly, the candidates were matched against the tenant's rows however the statistics
    suggested, and statistics that do not know the tenant (a first import before autovacuum
    analyzes it, a new tenant in a table of others) suggested a loop over every row of the tenant
    for each candidate. Behind OFFSET 0 the LATERAL lookup is planned on its own, with the outer
    row's key as parameters (as migration 0014's lookups are). The tenant is the candidate's own
    (the candidate functions return it, migration 0016), not the search's: with the tenant a
    constant (or a list of two), PostgreSQL prices any index that starts with the tenant like
    the primary key when it expects the tenant to have no rows, and took one of those, reading
    the tenant's rows for every candidate (docs/benchmarks.md, "Small namespaces")."""
    return (
        select(*columns)
        .where(Memory.tenant_id == tenant_id, Memory.id == memory_id, *conditions)
        .correlate_except(Memory)
        .offset(literal_column("0"))
        .lateral(name)
    )


@lru_cache(maxsize=256)
def _statement(shape: _Shape) -> _Statement:
    tenant_id, namespace_id = _P.tenant_id, _P.namespace_id
    where = list(memories_repo.bound_read_conditions(shape.filters))
    # Implied by the scope chain, but said plainly it lets the scans inside the statement (a
    # filtered search's, ts_rank_cd's) start from the tenant-led indexes instead of skipping
    # through every tenant's part of them. Candidates found elsewhere are read by _by_key.
    visible = Memory.tenant_id.in_([tenant_id, SYSTEM_TENANT_ID])
    weight = _P.weight
    with_context = "context" in shape.used

    if shape.bm25:
        lexemes = cast(_P.lexemes, ARRAY(TSQUERY))

        # BM25 where the word indexes find the rows (migrations 0010, 0013): the best matches of the
        # scope chain come back scored, and only those are read again here, under RLS and the
        # read conditions.
        def matched(limit: Any, name: str) -> Any:
            # Live memories from the namespace's own word index (migration 0013); the rest, which
            # that index leaves out, from the full-text index.
            if shape.live:
                found = func.memvault_word_best_keyed(
                    namespace_id, _P.picking_words, _P.words, lexemes, _P.idf, _P.avg_len, limit
                )
            else:
                found = func.memvault_word_top_keyed(
                    namespace_id, cast(_P.picking, TSQUERY), lexemes, _P.idf, _P.avg_len, False, limit
                )
            return found.table_valued("tenant_id", "id", "score").render_derived(name=name)

        def best(found: Any) -> Any:
            # The match's key is its own: its row is read only to check the read conditions.
            row = _by_key(found.c.tenant_id, found.c.id, [Memory.id], where, f"{found.name}_row")
            return (
                select(found.c.tenant_id, found.c.id, found.c.score.label("lex_score"))
                .select_from(found)
                .join(row, true())
                .order_by(found.c.score.desc(), found.c.id)
                .limit(_P.candidates)
            )

        def best_scored(rows: Any, name: str) -> Any:
            # ``rows`` (tenant_id, id), each holding a picking word and passing the read
            # conditions, scored on every query word as memvault_word_best scores: the best first.
            scored = (
                func.memvault_word_scores(
                    select(func.array_agg(rows.c.id)).scalar_subquery(), lexemes, _P.idf, _P.avg_len
                )
                .table_valued("id", "score")
                .render_derived(name=name)
            )
            return (
                select(rows.c.tenant_id, rows.c.id, scored.c.score.label("lex_score"))
                .join(scored, scored.c.id == rows.c.id)
                .order_by(scored.c.score.desc(), rows.c.id)
                .limit(_P.candidates)
            )

        def every_live_match() -> Any:
            # Each match checked once against the read conditions, in a join planned with the
            # filter's values (by key for a broad filter, by hash against the rows a narrow one
            # keeps); only those that pass are scored, with the same scores memvault_word_best
            # gives (migration 0017).
            found = (
                func.memvault_word_matches_keyed(namespace_id, _P.picking_words)
                .table_valued("tenant_id", "id")
                .render_derived(name="word_all")
            )
            passing = (
                select(Memory.tenant_id, Memory.id)
                .join(found, and_(found.c.tenant_id == Memory.tenant_id, found.c.id == Memory.id))
                .where(*where, visible)
                .cte("passing")
            )
            return best_scored(passing, "passing_scores")

        def the_readers_own() -> Any:
            # A reader's small scope chain (retrieval/chain.py): its rows that pass and hold a
            # picking word, found through the owner indexes and scored on every query word, where
            # the namespace's best matches would be mostly other users'. Exact, like the second
            # pass below.
            holding = (
                select(Memory.tenant_id, Memory.id)
                .where(*where, visible, Memory.tsv.op("@@")(cast(_P.picking, TSQUERY)))
                .cte("own_matches")
            )
            return best_scored(holding, "own_scores")

        if shape.own_words:
            lex_inner = the_readers_own().subquery("lex_inner")
        else:
            # First the best `prefetch` matches. They hold the best candidates of every match
            # unless the read conditions (filters, a narrower memory of the same key) left fewer
            # than asked of a list that was cut short: only then are all matches read.
            prefetched = select(matched(_P.prefetch, "word_top")).cte("prefetched")
            first = best(prefetched).cte("first")
            short = and_(
                select(func.count()).select_from(first).scalar_subquery() < _P.candidates,
                select(func.count()).select_from(prefetched).scalar_subquery() >= _P.prefetch,
            )
            every = (
                every_live_match() if shape.live else best(matched(cast(literal(None), Integer), "word_all"))
            ).where(short)
            lex_inner = union_all(
                select(first.c.tenant_id, first.c.id, first.c.lex_score).where(~short), every
            ).subquery("lex_inner")
    else:
        lex_inner = _ts_rank_inner(
            Memory, [*where, visible], lexical_query(_P.query_text), _P.candidates, word_index=True
        )
    if shape.nearest:
        # Only the read conditions beyond the scope chain and lifecycle (a narrower memory of the
        # same key) can drop one of these: rare, and then the channel has a candidate less.
        found = (
            func.memvault_nearest_keyed(namespace_id, _P.query_vector, _P.model_id, _P.candidates)
            .table_valued("tenant_id", "id", "dist")
            .render_derived(name="nearest")
        )
        row = _by_key(found.c.tenant_id, found.c.id, [Memory.id], where, "nearest_row")
        dense_inner = select(*found.c).select_from(found).join(row, true()).subquery("dense_inner")
    elif shape.dense:
        dense_inner = _dense_inner(Memory, [*where, visible], _P.query_vector, _P.model_id, _P.candidates)
    else:
        dense_inner = None
    # Read again by the neighbour lookups: computed once.
    fused = select(_fuse(lex_inner, dense_inner, func.rank)).cte("fused")

    if with_context:
        order_at, order_seq = session_order(Memory)
        placed = _by_key(
            fused.c.tenant_id,
            fused.c.id,
            [Memory.session_id, order_at.label("ord"), order_seq.label("seq")],
            # Sessions are the tenant's own: the probes below look in the tenant's rows only.
            [Memory.session_id.is_not(None)],
            "placed",
        )
        base = (
            select(fused.c.id, placed.c.session_id, placed.c.ord, placed.c.seq)
            .select_from(fused)
            .join(placed, true())
            .where(or_(fused.c.dense_rank <= CONTEXT_PROBED, fused.c.lexical_rank <= CONTEXT_PROBED))
            .cte("base")
        )

        def adjacent(before: bool):  # type: ignore[no-untyped-def]
            # One probe of the session index per candidate and side, under the search's own rules.
            mine, theirs = tuple_(*session_order(Memory)), tuple_(base.c.ord, base.c.seq)
            step = (
                select(Memory.tenant_id.label("tenant_id"), Memory.id.label("id"))
                .where(
                    # Sessions belong to one namespace. Spelled out (the scope chain's ORs also
                    # say it) so that the session index serves the probe.
                    Memory.tenant_id == tenant_id,
                    Memory.namespace_id == namespace_id,
                    Memory.session_id == base.c.session_id,
                    mine < theirs if before else mine > theirs,
                    *where,
                )
                .order_by(*(c.desc() if before else c for c in session_order(Memory)))
                .limit(1)
                .lateral("step")
            )
            return select(
                base.c.id.label("a"), step.c.tenant_id.label("b_tenant_id"), step.c.id.label("b")
            ).select_from(base.join(step, true()))

        edges = union_all(adjacent(True), adjacent(False)).cte("edges")
        pool_ids = union(select(fused.c.tenant_id, fused.c.id), select(edges.c.b_tenant_id, edges.c.b)).cte("pool_ids")
    else:
        pool_ids = select(fused.c.tenant_id, fused.c.id).cte("pool_ids")
    pool = (
        select(pool_ids.c.tenant_id, pool_ids.c.id, fused.c.dense_rank, fused.c.lexical_rank, fused.c.lex_score)
        .outerjoin(fused, (fused.c.tenant_id == pool_ids.c.tenant_id) & (fused.c.id == pool_ids.c.id))
        .cte("pool")
    )
    cosine = 1 - Memory.embedding.cosine_distance(_P.query_vector) if shape.dense else cast(literal(None), Float)
    # Every candidate's own word score: the word channel's candidates have theirs, those only
    # meaning or a neighbour brought in are scored here.
    if shape.bm25:
        unscored = select(func.array_agg(pool.c.id)).where(pool.c.lexical_rank.is_(None)).scalar_subquery()
        scored = (
            func.memvault_word_scores(unscored, lexemes, _P.idf, _P.avg_len)
            .table_valued("id", "score")
            .render_derived(name="word_scores")
        )
        lex_score = func.nullif(func.coalesce(pool.c.lex_score, scored.c.score), 0.0)
    else:
        own_lex = func.nullif(func.ts_rank_cd(Memory.tsv, lexical_query(_P.query_text)), 0.0)

    # ---- signals on the candidates ----
    at = memories_repo.date_of(Memory)
    epoch = func.extract("epoch", _P.ref - at)
    recency = _decay(epoch, _P.half_life_s)
    # In double precision: the columns are `real`, whose product of two tiny stored values underflows
    # (an error in PostgreSQL, which made every search touching such a memory a 500).
    importance = cast(Memory.importance, Float) * cast(Memory.confidence, Float)
    access = func.ln(1 + Memory.access_count) * func.coalesce(
        _decay(func.extract("epoch", _P.ref - Memory.last_accessed_at), _P.half_life_s), 0.0
    )
    strength = memories_repo.strength_of(Memory, now=_P.ref, half_life_days=_P.strength_half_life_days)
    intent_value = case((Memory.type == _P.intent, 1.0), else_=0.0) if shape.intent else cast(literal(None), Float)
    if shape.graph:
        link = (
            select(func.max(case((MemoryEntity.entity_id == any_(_P.named), 1.0), else_=0.5)))
            .where(
                MemoryEntity.tenant_id == Memory.tenant_id,
                MemoryEntity.memory_id == Memory.id,
                MemoryEntity.entity_id == any_(_P.linked),
            )
            .scalar_subquery()
        )
        graph_value = func.coalesce(link, 0.0)
    else:
        graph_value = cast(literal(None), Float)
    if shape.time == "window":
        time_value = case((and_(at >= _P.window_start, at < _P.window_end), 1.0), else_=0.0)
    elif shape.time is not None:
        time_value = func.extract("epoch", at)
    else:
        time_value = cast(literal(None), Float)
    retrieval = func.coalesce(weight["dense"] / (RRF_K + pool.c.dense_rank), 0.0) + func.coalesce(
        weight["lexical"] / (RRF_K + pool.c.lexical_rank), 0.0
    )
    # Each candidate's own signals, computed where its row is read: by its key.
    own_signals = [
        cosine.label("cosine"),
        recency.label("recency"),
        importance.label("importance"),
        access.label("access"),
        strength.label("strength"),
        intent_value.label("intent"),
        graph_value.label("graph"),
        time_value.label("time"),
    ]
    if not shape.bm25:
        own_signals.append(own_lex.label("lex_score"))
    row = _by_key(pool.c.tenant_id, pool.c.id, own_signals, [], "candidate")
    signals = select(
        pool.c.id,
        # Whose row it is (the tenant's or a shared one): the hits are read again by full key.
        pool.c.tenant_id,
        pool.c.dense_rank,
        pool.c.lexical_rank,
        lex_score.label("lex_score") if shape.bm25 else row.c.lex_score,
        *(row.c[c.name] for c in own_signals if c.name != "lex_score"),
        func.count(pool.c.dense_rank).over().label("n_dense"),
        func.count(pool.c.lexical_rank).over().label("n_lexical"),
        (func.count().over() - func.count(func.coalesce(pool.c.dense_rank, pool.c.lexical_rank)).over()).label(
            "n_context"
        ),
        retrieval.label("retrieval"),
    ).select_from(pool)
    if shape.bm25:
        signals = signals.outerjoin(scored, scored.c.id == pool.c.id)
    signals = signals.join(row, true()).subquery("signals")
    # Where each candidate stands on retrieval alone: the priors and the order cue rank only the
    # retrieval head, so they reorder what retrieval found relevant instead of pulling an old or
    # merely recent candidate up from far down the list. Window, intent and graph matches count
    # anywhere.
    headed = select(
        signals.c,
        func.row_number().over(order_by=(signals.c.retrieval.desc(), signals.c.id)).label("head_pos"),
        # Strength is unbounded: bucket it relative to the strongest candidate.
        (signals.c.strength / func.nullif(func.max(signals.c.strength).over(), 0)).label("strength_unit"),
    ).subquery("headed")
    sg = headed.c
    in_head = sg.head_pos <= _P.head

    def head_rank(*order):  # type: ignore[no-untyped-def]
        return case((in_head, func.rank().over(partition_by=in_head, order_by=order)), else_=None)

    def bucket(col):  # type: ignore[no-untyped-def]
        return func.round(col * BUCKETS).desc()

    def match_rank(col):  # type: ignore[no-untyped-def]
        # Stronger matches first (a named entity before a related one); no match, no rank.
        matched = col > 0
        return case((matched, func.dense_rank().over(partition_by=matched, order_by=col.desc())), else_=None)

    no_rank = cast(literal(None), Integer)
    intent_rank = case((sg.intent == 1.0, 1), else_=None) if shape.intent else no_rank
    graph_rank = match_rank(sg.graph) if shape.graph else no_rank
    if shape.time == "window":
        time_rank = case((sg.time == 1.0, 1), else_=None)
    elif shape.time == "newest":
        time_rank = head_rank(sg.time.desc())
    elif shape.time == "oldest":
        time_rank = head_rank(sg.time.asc())
    else:
        time_rank = no_rank

    # Relative scores for weighted fusion, each channel's value scaled to 0..1 over the candidates.
    # Cosine has no natural zero: min to max. BM25, access and strength do (no match, never
    # recalled): a share of the best, so the weakest match still counts for more than none.
    def relative(col, *, invert: bool = False):  # type: ignore[no-untyped-def]
        lo, hi = func.min(col).over(), func.max(col).over()
        spread = func.nullif(hi - lo, 0)
        scaled = ((hi - col) if invert else (col - lo)) / spread
        # All equal: every candidate gets the full value (nothing to tell them apart).
        return func.coalesce(case((col.is_(None), None), else_=func.coalesce(scaled, 1.0)), 0.0)

    def share_of_best(col):  # type: ignore[no-untyped-def]
        return func.coalesce(col / func.nullif(func.max(col).over(), 0), 0.0)

    ranked = select(
        sg,
        head_rank(bucket(sg.recency)).label("recency_rank"),
        head_rank(bucket(sg.importance)).label("importance_rank"),
        head_rank(bucket(sg.access)).label("access_rank"),
        head_rank(bucket(sg.strength_unit)).label("strength_rank"),
        intent_rank.label("intent_rank"),
        graph_rank.label("graph_rank"),
        time_rank.label("time_rank"),
        relative(sg.cosine).label("dense_rel"),
        share_of_best(sg.lex_score).label("lexical_rel"),
        share_of_best(sg.access).label("access_rel"),
        share_of_best(sg.strength).label("strength_rel"),
        relative(sg.time, invert=shape.time == "oldest").label("time_rel"),
    ).cte("ranked")
    if with_context:
        # A memory's own match, for its neighbours: retrieval's channels, weighted as they are.
        rel = {"dense": ranked.c.dense_rel, "lexical": ranked.c.lexical_rel}
        own = sum((weight[name] * rel[name] for name in shape.own), cast(literal(0.0), Float)) / sum(
            (weight[name] for name in shape.own), cast(literal(0.0), Float)
        )
        pairs = union_all(
            select(edges.c.a.label("x"), edges.c.b.label("y")), select(edges.c.b.label("x"), edges.c.a.label("y"))
        ).subquery("pairs")
        near = (
            select(pairs.c.x.label("id"), func.max(own).label("context"))
            .join(ranked, ranked.c.id == pairs.c.y)
            .group_by(pairs.c.x)
            .subquery("near")
        )
        context_value = near.c.context
        outer = ranked.outerjoin(near, near.c.id == ranked.c.id)
    else:
        context_value = cast(literal(None), Float)
        outer = ranked
    rc = ranked.c
    rank_col = {
        "dense": rc.dense_rank,
        "lexical": rc.lexical_rank,
        "recency": rc.recency_rank,
        "importance": rc.importance_rank,
        "access": rc.access_rank,
        "strength": rc.strength_rank,
        "intent": rc.intent_rank,
        "graph": rc.graph_rank,
        "time": rc.time_rank,
        "context": match_rank(context_value) if with_context else no_rank,
    }
    value_col = {
        "dense": rc.cosine,
        "lexical": rc.lex_score,
        "recency": rc.recency,
        "importance": rc.importance,
        "access": rc.access,
        "strength": rc.strength,
        "intent": rc.intent,
        "graph": rc.graph,
        "time": rc.time,
        "context": context_value,
    }
    # Values already within 0..1 (recency, importance, intent, graph, a window match, context)
    # count as they are; unbounded ones are scaled over the candidates.
    unit_col = {
        "dense": rc.dense_rel,
        "lexical": rc.lexical_rel,
        "recency": rc.recency,
        "importance": rc.importance,
        "access": rc.access_rel,
        "strength": rc.strength_rel,
        "intent": rc.intent,
        "graph": rc.graph,
        "time": rc.time if shape.time == "window" else rc.time_rel,
        "context": context_value,
    }
    fused_score = cast(literal(0.0), Float)
    for name in shape.used:
        if shape.fusion == "weighted":
            fused_score = fused_score + weight[name] * func.coalesce(unit_col[name], 0.0)
        else:
            fused_score = fused_score + func.coalesce(weight[name] / (RRF_K + rank_col[name]), 0.0)

    # The hits first, then their rows: only those are read whole.
    top = (
        select(
            *rc,
            fused_score.label("fused_score"),
            rank_col["context"].label("context_rank"),
            context_value.label("context_value"),
            func.count(context_value).over().label("n_near"),
        )
        .select_from(outer)
        # At equal scores a memory's own match goes first: under rank fusion a match and the
        # neighbour it lends its match to can each be first in one channel.
        .order_by(fused_score.desc(), rc.retrieval.desc(), rc.id)
        .limit(_P.limit)
        .subquery("top")
    )
    stmt = (
        select(Memory, *top.c)
        .select_from(top)
        # A hit is shown, not compared again: its vector and word index stay in the database.
        .options(defer(Memory.embedding), defer(Memory.tsv))
        .join(Memory, (Memory.tenant_id == top.c.tenant_id) & (Memory.id == top.c.id))
        .order_by(top.c.fused_score.desc(), top.c.retrieval.desc(), top.c.id)
    )
    return _Statement(
        stmt=stmt,
        rank_key={name: "context_rank" if name == "context" else rank_col[name].name for name in CHANNELS},
        value_key={name: "context_value" if name == "context" else value_col[name].name for name in CHANNELS},
    )


async def hybrid_search(
    s: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    query: str,
    query_vector: list[float] | None,
    model_id: str,
    filters: MemoryFilters | None,
    limit: int,
    candidates: int,
    head: int = 10,
    weights: dict[str, float] | None = None,
    fusion: str = "rrf",
    cues: QueryCues | None = None,
    entities: NamedEntities | None = None,
    reference_time: datetime | None = None,
    half_life_days: float = 30.0,
    strength_half_life_days: float = 30.0,
    terms: TermStats | None = None,
    settings_set: bool = False,
    small_chain: bool = False,
) -> SearchOutcome:
    """``fusion="rrf"``: weighted reciprocal rank; the priors (recency, importance, access,
    strength) and the order cue rank only the retrieval head, cues (intent, graph, time window)
    rank every candidate they match. ``fusion="weighted"``: the weighted mean of each channel's
    value scaled to 0..1 over the candidates (relative score fusion).

    The context channel adds the memories just before and after each of the best candidates
    (``CONTEXT_PROBED`` per channel) in its session to the candidates, and credits every
    candidate with how well its session neighbours match the query: conversational evidence is
    spread over adjacent turns (a question in one, the answer in the next), and a turn whose
    neighbour matches is likely part of the exchange asked about.

    ``small_chain``: the filters read as a user or in a session whose scope chain is small
    (retrieval/chain.py): the lexical channel scores the reader's own rows directly.

    ``settings_set``: the transaction opened with ``search_settings(filters, candidates)``, so
    they cost no round trip of their own here."""
    started = time.perf_counter()
    cues = cues or QueryCues()
    entities = entities or NamedEntities()
    filters = filters or MemoryFilters()
    # Channels take part when they have weight and something to say for this query.
    w = {"dense": 1.0, "lexical": 1.0, **(weights or {})}
    active = {
        "dense": query_vector is not None,
        "lexical": True,
        "recency": True,
        "importance": True,
        "access": True,
        "strength": True,
        "intent": cues.intent is not None,
        "graph": bool(entities),
        "time": cues.window is not None or cues.order is not None,
        "context": True,  # until no candidate turns out to have a session neighbour
    }
    used = {name: w.get(name, 0.0) for name, on in active.items() if on and w.get(name, 0.0) > 0}
    # A neighbour's match is judged on what retrieval judges: its meaning and its words.
    own = tuple(name for name in ("dense", "lexical") if name in used)
    if not own:
        used.pop("context", None)
    # Only looked for with weight: finding neighbours costs index probes the other channels don't.
    active["context"] = "context" in used
    picking = terms.matching() if terms is not None else []
    bm25 = terms is not None and bool(picking)
    live = memories_repo.live_read(filters)
    shape = _Shape(
        filters=memories_repo.filter_form(filters),
        dense=query_vector is not None,
        nearest=query_vector is not None and plan_cache_mode(filters) == "force_generic_plan",
        bm25=bm25,
        live=live,
        own_words=bm25 and small_chain and owner_read(filters),
        used=tuple(used),
        own=own,
        fusion="weighted" if fusion == "weighted" else "rrf",
        intent=cues.intent is not None,
        graph=bool(entities),
        time="window" if cues.window is not None else cues.order,
    )
    prepared = _statement(shape)
    if not settings_set:
        await set_local(s, search_settings(filters, candidates))
    words = sorted(lx for lx, df in terms.df.items() if df) if terms is not None else []
    params: dict[str, Any] = {
        "query_vector": query_vector,
        "model_id": model_id,
        "candidates": candidates,
        "query_text": query,
        "picking": tsquery_text(*picking) if bm25 else None,
        "picking_words": picking,
        "words": words,
        "lexemes": [tsquery_text(lx) for lx in words],
        "idf": [terms.idf(lx) for lx in words] if terms is not None else [],
        "avg_len": terms.avg_len if terms is not None else 1.0,
        # How many of the best word matches to read first: room for the few that a narrower
        # memory of the same key hides, and with filters for what they reject.
        "prefetch": (2 if filters == MemoryFilters() else 4) * candidates,
        "ref": reference_time or datetime.now(UTC),
        "half_life_s": half_life_days * 86400.0,
        "strength_half_life_days": strength_half_life_days,
        "head": head,
        "limit": limit,
        "intent": cues.intent,
        "named": list(entities.named),
        "linked": [*entities.named, *entities.related],
        "window_start": cues.window[0] if cues.window else None,
        "window_end": cues.window[1] if cues.window else None,
        **{f"w_{name}": float(w.get(name, 0.0)) for name in CHANNELS},
        **memories_repo.read_parameters(tenant_id, namespace_id, filters),
    }
    rows = (await s.execute(prepared.stmt, params)).all()
    if active["context"] and not any(row._mapping["n_near"] for row in rows):
        # No candidate had a session neighbour: the channel had nothing to say.
        active["context"] = False
        used.pop("context")
    # Normalised so that the best value (weighted) or rank 1 (rrf) in every channel that counted
    # scores 1.0: scores read the same across requests whatever the weights.
    total = sum(used.values())
    best_possible = (total if fusion == "weighted" else total / (RRF_K + 1)) or 1.0
    hits = []
    n_dense = n_lexical = n_context = 0
    for row in rows:
        m = row[0]
        r = row._mapping
        n_dense, n_lexical, n_context = r["n_dense"], r["n_lexical"], r["n_context"]
        channels: dict[str, tuple[int | None, float | None]] = {}
        for name, on in active.items():
            if on:
                value = r[prepared.value_key[name]]
                channels[name] = (r[prepared.rank_key[name]], None if value is None else round(float(value), 6))
        hits.append(
            Hit(
                memory=m,
                score=round(float(r["fused_score"]) / best_possible, 6),
                semantic_relevance=None if r["cosine"] is None else round(float(r["cosine"]), 6),
                dense_rank=r["dense_rank"],
                lexical_rank=r["lexical_rank"],
                lexical_score=None if r["lex_score"] is None else float(r["lex_score"]),
                channels=channels,
            )
        )
    elapsed = (time.perf_counter() - started) * 1000
    return SearchOutcome(
        hits=hits,
        # The window counts run over every candidate, so any returned row carries them.
        candidates={"dense": n_dense, "lexical": n_lexical, **({"context": n_context} if active["context"] else {})},
        weights=used,
        fusion=fusion,
        timings_ms={"sql": round(elapsed, 2)},
    )


async def neighbours_of(
    s: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    filters: MemoryFilters | None,
    memories: list[Memory],
    n: int,
) -> dict[uuid.UUID, list[Memory]]:
    """Up to ``n`` memories before and after each memory in its session, in session order (valid
    time, then insertion order), under the same visibility rules as the search itself."""
    where = memories_repo.read_conditions(tenant_id, namespace_id, filters)
    order = session_order(Memory)
    out: dict[uuid.UUID, list[Memory]] = {}
    for m in memories:
        if m.session_id is None:
            out[m.id] = []
            continue
        key = (m.valid_from or m.created_at, m.seq)
        same = [*where, Memory.tenant_id == tenant_id, Memory.session_id == m.session_id]
        before = (
            await s.scalars(
                select(Memory).where(*same, tuple_(*order) < tuple_(*key)).order_by(*(c.desc() for c in order)).limit(n)
            )
        ).all()
        after = (
            await s.scalars(select(Memory).where(*same, tuple_(*order) > tuple_(*key)).order_by(*order).limit(n))
        ).all()
        out[m.id] = [*reversed(before), *after]
    return out
