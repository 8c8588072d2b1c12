"""What of a plan decides the statement's SQL (its ``Shape``), and what only fills its parameters.

Statements are built once per shape (sql/statement.py): building one costs more Python (10-15
ms) than PostgreSQL takes to run it. Everything else a search varies (tenant, namespace, filter
values, query vector, words, weights, times, limits, cue values) is a bound parameter, so a
statement built for one tenant's search serves the next tenant's."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, Float, Integer, Text, bindparam
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import UUID as PG_UUID

from memvault.db.session import on_citus
from memvault.memories import reads_repository as memory_reads
from memvault.memories.models import Memory
from memvault.memories.schemas import MemoryFilters
from memvault.retrieval.chain import owner_read
from memvault.retrieval.cues import QueryCues
from memvault.retrieval.lexical import tsquery_text
from memvault.retrieval.plan import NamedEntities, SearchPlan
from memvault.retrieval.schemas import CHANNELS
from memvault.retrieval.sql.settings import plan_cache_mode


@dataclass(frozen=True)
class Shape:
    """What decides the hybrid statement's SQL."""

    filters: tuple[str, ...]  # which filters are set (memories.reads_repository.filter_form)
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
    # Session-less candidates' neighbours are inferred (issue 30, sql/inferred.py).
    inferred: bool = False
    # On Citus: every read of a memory by key names the tenant too (sql/common.routed).
    routed: bool = False
    # The hits' vectors come with them: the timeline judges its subject on them (sql/timeline.py).
    vectors: bool = False


class Params:
    """The statement's bound parameters, one object each (a name used twice is one parameter).
    The tenant and namespace are the read conditions' own (memories.reads_repository.read_parameters)."""

    tenant_id = bindparam("read_tenant_id", type_=PG_UUID(as_uuid=True))
    namespace_id = bindparam("read_namespace_id", type_=PG_UUID(as_uuid=True))
    # The system tenant, or None on Citus (memories.reads_repository._values).
    system_tenant = bindparam("read_system_tenant", type_=PG_UUID(as_uuid=True))

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


@dataclass
class Channels:
    """Which channels take part in a search: those with weight and something to say for its query."""

    weights: dict[str, float]  # every channel's weight, the defaults for dense and lexical included
    active: dict[str, bool]  # channel -> it has something to say (context: until no candidate has a neighbour)
    used: dict[str, float]  # the active channels with weight, and their weights: the fusion's
    own: tuple[str, ...]  # channels a neighbour's match is judged on (context)

    def drop_context(self) -> None:
        """No candidate had a session neighbour: the channel had nothing to say."""
        self.active["context"] = False
        self.used.pop("context")


def channels_of(plan: SearchPlan) -> Channels:
    cues = plan.cues or QueryCues()
    w = {"dense": 1.0, "lexical": 1.0, **(plan.weights or {})}
    active = {
        "dense": plan.query_vector is not None,
        "lexical": True,
        "recency": True,
        "importance": True,
        "access": True,
        "strength": True,
        "intent": cues.intent is not None,
        "graph": bool(plan.entities),
        "time": cues.order is not None or cues.window is not None or cues.relative is not None,
        "context": True,  # until no candidate turns out to have a session neighbour
    }
    used = {name: w.get(name, 0.0) for name, on in active.items() if on and w.get(name, 0.0) > 0}
    # A neighbour's match is judged on what retrieval judges: its meaning and its words.
    own = tuple(name for name in ("dense", "lexical") if name in used)
    if not own:
        used.pop("context", None)
    # Only looked for with weight: finding neighbours costs index probes the other channels don't.
    active["context"] = "context" in used
    return Channels(weights=w, active=active, used=used, own=own)


def _picking(plan: SearchPlan) -> list[str]:
    """The query words the BM25 channel looks rows up by (none: full text ranks instead)."""
    return plan.terms.matching() if plan.terms is not None else []


def shape_of(plan: SearchPlan, channels: Channels) -> Shape:
    cues = plan.cues or QueryCues()
    filters = plan.filters or MemoryFilters()
    bm25 = plan.terms is not None and bool(_picking(plan))
    return Shape(
        filters=memory_reads.filter_form(filters),
        dense=plan.query_vector is not None,
        nearest=plan.query_vector is not None and plan_cache_mode(filters) == "force_generic_plan",
        bm25=bm25,
        live=memory_reads.live_read(filters),
        own_words=bm25 and plan.small_chain and owner_read(filters),
        used=tuple(name for name in channels.used if name != "time" or not timeline_cue(plan, channels)),
        own=channels.own,
        fusion="weighted" if plan.fusion == "weighted" else "rrf",
        intent=cues.intent is not None,
        graph=bool(plan.entities),
        # A time cue re-orders within the subject after the fusion (retrieval/timeline.py): the
        # statement neither ranks by time nor adds it to the fused score.
        time=None if timeline_cue(plan, channels) else "window" if cues.window is not None else cues.order,
        inferred="context" in channels.used and plan.session_gap_minutes > 0,
        routed=on_citus(),
        vectors=timeline_on(plan, channels),
    )


def timeline_on(plan: SearchPlan, channels: Channels) -> bool:
    """The query has a time cue and the time channel has weight: the timeline acts on the hits."""
    return plan.cues is not None and plan.cues.timeline and channels.weights.get("time", 0.0) > 0


def timeline_cue(plan: SearchPlan, channels: Channels) -> bool:
    """The timeline ranks by time in place of the fusion: every time cue but a plain window."""
    return timeline_on(plan, channels) and plan.cues is not None and not plan.cues.fused_window


def parameters(plan: SearchPlan, channels: Channels, shape: Shape) -> dict[str, Any]:
    """The values of the statement's parameters (``Params``) for ``plan``."""
    cues = plan.cues or QueryCues()
    entities = plan.entities or NamedEntities()
    filters = plan.filters or MemoryFilters()
    terms = plan.terms
    picking = _picking(plan)
    words = sorted(lx for lx, df in terms.df.items() if df) if terms is not None else []
    return {
        "query_vector": plan.query_vector,
        "model_id": plan.model_id,
        "candidates": plan.candidates,
        "query_text": plan.query,
        "picking": tsquery_text(*picking) if shape.bm25 else None,
        "picking_words": picking,
        "words": words,
        "lexemes": [tsquery_text(lx) for lx in words],
        "idf": [terms.idf(lx) for lx in words] if terms is not None else [],
        "avg_len": terms.avg_len if terms is not None else 1.0,
        # How many of the best word matches to read first: room for the few that a narrower
        # memory of the same key hides, and with filters for what they reject.
        "prefetch": (2 if filters == MemoryFilters() else 4) * plan.candidates,
        "ref": plan.reference_time or datetime.now(UTC),
        "half_life_s": plan.half_life_days * 86400.0,
        "strength_half_life_days": plan.strength_half_life_days,
        "head": plan.head,
        "limit": plan.limit,
        "intent": cues.intent,
        "named": list(entities.named),
        "linked": [*entities.named, *entities.related],
        "window_start": cues.window[0] if cues.window else None,
        "window_end": cues.window[1] if cues.window else None,
        **{f"w_{name}": float(channels.weights.get(name, 0.0)) for name in CHANNELS},
        **memory_reads.read_parameters(plan.tenant_id, plan.namespace_id, filters),
        **({"session_gap_s": plan.session_gap_minutes * 60.0} if shape.inferred else {}),
    }
