"""Hybrid search: dense (pgvector HNSW, cosine) and lexical (full text) candidates, ranked again by
signals (recency, importance, access, strength, intent match, entities named, time cues) and fused
by weighted reciprocal rank or weighted relative scores, all in one SQL statement inside the
caller's tenant transaction.

``hybrid_search`` answers a ``SearchPlan``: it picks the statement for the plan's shape (built
once per shape, sql/statement.py), binds the plan's values, runs it, and reads the rows into hits
with their explanation (each channel's rank and value) and the search's metrics."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from memvault.db.session import reading_as_system, system_apart
from memvault.memories import split
from memvault.memories.reads_repository import system_shared, unshadowed
from memvault.principal import SYSTEM_TENANT_ID
from memvault.retrieval import timeline, window
from memvault.retrieval.cues import QueryCues
from memvault.retrieval.hits import Hit, SearchOutcome
from memvault.retrieval.plan import SearchPlan
from memvault.retrieval.sql.common import RRF_K
from memvault.retrieval.sql.fusion import Statement
from memvault.retrieval.sql.settings import search_settings
from memvault.retrieval.sql.shape import Channels, channels_of, parameters, shape_of, timeline_cue, timeline_on
from memvault.retrieval.sql.statement import search_rows, statement_for
from memvault.retrieval.sql.timeline import floats


async def hybrid_search(s: AsyncSession, plan: SearchPlan) -> SearchOutcome:
    """The plan's hits, best first, with their explanation and the search's metrics.

    The context channel adds the memories just before and after each of the best candidates
    (``sql.common.CONTEXT_PROBED`` per channel) in its session to the candidates, and credits
    every candidate with how well its session neighbours match the query: conversational
    evidence is spread over adjacent turns (a question in one, the answer in the next), and a
    turn whose neighbour matches is likely part of the exchange asked about."""
    started = time.perf_counter()
    settings = None if plan.settings_set else search_settings(plan.filters, plan.candidates)
    hits, counts, channels, timed = await _search(s, plan, settings)
    if system_apart() and await system_shared(s):
        # On Citus: the system tenant's shared memories, from their own shard (memories/split.py).
        async with reading_as_system(s, plan.tenant_id):
            shared, shared_counts, _, _ = await _search(s, replace(plan, tenant_id=SYSTEM_TENANT_ID), None)
        shown = await unshadowed(s, plan.tenant_id, plan.namespace_id, plan.filters, shared, lambda h: h.memory)
        hits = split.merge_hits(hits, shown)
        counts = {name: n + shared_counts.get(name, 0) for name, n in counts.items()}
    explained: dict[str, str] = {}
    used = channels.used
    if timed is not None:
        time_part = _time_part(channels, plan.fusion)
        # The subject is judged on the hits' vectors, read unless a window's reading cannot turn on it.
        judged = not timed.fused_window or timeline.window_needs_vectors(plan.query, hits, timed, time_part)
        vectors = _vectors(hits[: timeline.FETCH]) if judged else {}
        arranged = timeline.arrange(plan.query, hits, timed, vectors, plan.limit, time_part)
        hits, explained = arranged.hits, arranged.explained
    elif (lifting := _window_weight(plan)) > 0:
        hits = window.lift(hits, lifting, plan.session_gap_minutes * 60.0)[: plan.limit]
        if any("window" in h.channels for h in hits):  # reported where it counted, as the channels are
            used = {**used, "window": lifting}
    elapsed = (time.perf_counter() - started) * 1000
    return SearchOutcome(
        hits=hits,
        candidates=counts,
        weights=used,
        fusion=plan.fusion,
        timings_ms={"sql": round(elapsed, 2)},
        cues=explained,
    )


async def _search(
    s: AsyncSession, plan: SearchPlan, settings: dict[str, str] | None
) -> tuple[list[Hit], dict[str, int], Channels, QueryCues | None]:
    """The plan's statement run: its hits, candidate counts, the channels that counted, and the
    cues the timeline answers (None: it does not)."""
    channels = channels_of(plan)
    shape = shape_of(plan, channels)
    prepared = statement_for(shape)
    params = parameters(plan, channels, shape)
    # The cues the timeline answers, if it does (retrieval/timeline.py).
    timed = plan.cues if timeline_on(plan, channels) else None
    if timed is not None:
        if timeline_cue(plan, channels):
            # Time re-orders the fused hits within their subject, not in the fusion.
            channels.used.pop("time")
        params["limit"] = timeline.fetch(plan.limit)
    elif _window_weight(plan) > 0:
        params["limit"] = window.fetch(plan.limit)
    rows = await search_rows(s, prepared, params, settings)
    if channels.active["context"] and not any(row._mapping["n_near"] for row in rows):
        channels.drop_context()
    hits, counts = _hits(rows, prepared, channels, plan.fusion)
    return hits, counts, channels, timed


def _window_weight(plan: SearchPlan) -> float:
    """The weight of the best hit's conversation (retrieval/window.py); a query the timeline
    answers is ordered by time instead."""
    return float((plan.weights or {}).get("window", 0.0))


def _time_part(channels: Channels, fusion: str) -> Callable[[Hit], float]:
    """What the time channel added to a hit's (normalised) score: a plain window ranks in the
    fusion, and the timeline finds the subject as the question alone ranks the hits."""
    total = sum(channels.used.values())
    weight = channels.used.get("time", 0.0)
    best_possible = (total if fusion == "weighted" else total / (RRF_K + 1)) or 1.0

    def part(hit: Hit) -> float:
        rank, value = hit.channels.get("time", (None, None))
        if fusion == "weighted":
            return weight * (value or 0.0) / best_possible
        return weight / (RRF_K + rank) / best_possible if rank is not None else 0.0

    return part


def _vectors(hits: list[Hit]) -> dict[object, list[float]]:
    """The hits' vectors by memory id, read with them (``Shape.vectors``) and decoded only here, for
    the hits the timeline judges; none for fewer than two."""
    if len(hits) < 2:
        return {}
    return {h.memory.id: floats(h.vector) for h in hits if h.vector is not None}


def _hits(rows: Any, prepared: Statement, channels: Channels, fusion: str) -> tuple[list[Hit], dict[str, int]]:
    """The rows as hits, and how many candidates each channel found."""
    # Normalised so that the best value (weighted) or rank 1 (rrf) in every channel that counted
    # scores 1.0: scores read the same across requests whatever the weights.
    total = sum(channels.used.values())
    best_possible = (total if fusion == "weighted" else total / (RRF_K + 1)) or 1.0
    hits = []
    n_dense = n_lexical = n_context = 0
    for row in rows:
        r = row._mapping
        n_dense, n_lexical, n_context = r["n_dense"], r["n_lexical"], r["n_context"]
        explained: dict[str, tuple[int | None, float | None]] = {}
        for name, on in channels.active.items():
            if on:
                value = r[prepared.value_key[name]]
                explained[name] = (r[prepared.rank_key[name]], None if value is None else round(float(value), 6))
        hits.append(
            Hit(
                memory=row[0],
                score=round(float(r["fused_score"]) / best_possible, 6),
                semantic_relevance=None if r["cosine"] is None else round(float(r["cosine"]), 6),
                dense_rank=r["dense_rank"],
                lexical_rank=r["lexical_rank"],
                lexical_score=None if r["lex_score"] is None else float(r["lex_score"]),
                channels=explained,
                vector=r.get("hit_vector"),
            )
        )
    # The window counts run over every candidate, so any returned row carries them.
    counts = {"dense": n_dense, "lexical": n_lexical, **({"context": n_context} if channels.active["context"] else {})}
    return hits, counts
