"""The entity hop (issue 30, multi-hop questions): memories that share a specific entity with the
best first-stage hits join the hits, when the request asks for it (``SearchIn.hops``).

"Where is the company Ana works for based?": the first stage finds "Ana works at Acme" (linked to
Ana and Acme), but "Acme's headquarters are in Lyon" shares no word and little meaning with the
question. It shares the entity Acme with that hit: the hop reads the memories linked to the
entities of the best ``SEEDS`` hits (the bridge entities), leaving out the entities the query
itself names (the first stage has ranked those already: the graph channel) and entities linked to
more than ``MAX_LINKS`` memories (the user, a speaker linked to every turn: a hop through them
reaches everything and says nothing).

A reached memory scores its seed's score times ``DECAY``, times the mean of 1 and how well it
matches the query against how well the seed does (cosine ratio, at most 1): it sits below the hit
that led to it, never above, and half of its score is the path's alone, since the second piece of
evidence of a multi-hop question is the one that does not match the question. At most ``MAX_ADDED`` join,
and the list is cut to the request's limit again. Each carries ``signals.hop``: the seed, the
entity, the cosine. Reading goes through the search's own read conditions (sql/hops.py).

On LoCoMo the hop does not help: with the speakers as the only entities (hubs) it finds no
bridge; with the rule extractor's entities linked to every turn it lowered recall@10 from 0.758
to 0.740, every category falling (3 conversations, docs/benchmarks.md, "Multi-hop and
open-domain"): LoCoMo's questions do not chain through entities, and what a hop reaches displaces
evidence. It is off unless asked for."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from memvault.memories import reads_repository as memory_reads
from memvault.retrieval.hits import Hit
from memvault.retrieval.plan import SearchPlan
from memvault.retrieval.sql import hops as hops_sql

SEEDS = 3
MAX_LINKS = 50
MAX_ADDED = 3
DECAY = 0.85


@dataclass(frozen=True)
class HopPath:
    """How a hop reached a memory: from which hit, through which entity."""

    seed: uuid.UUID
    entity_id: uuid.UUID
    entity: str
    cosine: float


@dataclass
class HopOutcome:
    hits: list[Hit]
    paths: dict[uuid.UUID, HopPath]  # memory id -> its path, for the memories the hop added
    stage: str  # "ran" (something joined), "skipped" (nothing to hop from or to)
    ms: float


async def entity_hops(s: AsyncSession, plan: SearchPlan, hits: list[Hit], limit: int) -> HopOutcome:
    """``hits`` with the memories one entity away from the best of them merged in by score, cut
    to ``limit``."""
    started = time.perf_counter()

    def done(out: list[Hit], paths: dict[uuid.UUID, HopPath], stage: str) -> HopOutcome:
        return HopOutcome(out[:limit], paths, stage, (time.perf_counter() - started) * 1000)

    seeds = hits[:SEEDS]
    # The hop's value is the query's cosine: without a query vector there is nothing to rank by.
    if not seeds or plan.query_vector is None:
        return done(hits, {}, "skipped")
    named = list(plan.entities.named) if plan.entities else []
    found = await hops_sql.bridges(s, plan.tenant_id, plan.namespace_id, [h.memory.id for h in seeds], named, MAX_LINKS)
    if not found:
        return done(hits, {}, "skipped")
    # Each entity's path from the best seed linked to it.
    position = {h.memory.id: i for i, h in enumerate(seeds)}
    via: dict[uuid.UUID, tuple[Hit, str]] = {}
    for seed_id, entity_id, name in sorted(found, key=lambda f: position[f[0]]):
        via.setdefault(entity_id, (seeds[position[seed_id]], name))
    rows = await hops_sql.reached(
        s,
        memory_reads.filter_form(plan.filters),
        memory_reads.read_parameters(plan.tenant_id, plan.namespace_id, plan.filters),
        bridge_ids=list(via),
        exclude=[h.memory.id for h in hits],
        query_vector=plan.query_vector,
        model_id=plan.model_id,
        limit=MAX_ADDED * 4,
    )
    best: dict[uuid.UUID, tuple[Hit, HopPath]] = {}
    for memory, entity_id, cosine in rows:
        seed, name = via[entity_id]
        seed_cos = seed.semantic_relevance or 0.0
        closeness = min(1.0, max(cosine, 0.0) / seed_cos) if seed_cos > 0 else 0.0
        score = round(seed.score * DECAY * (1 + closeness) / 2, 6)
        # A memory reached through two bridges keeps its best path.
        if score <= 0 or (memory.id in best and best[memory.id][0].score >= score):
            continue
        hit = Hit(
            memory=memory,
            score=score,
            semantic_relevance=round(cosine, 6),
            dense_rank=None,
            lexical_rank=None,
            lexical_score=None,
        )
        best[memory.id] = hit, HopPath(seed=seed.memory.id, entity_id=entity_id, entity=name, cosine=cosine)
    reached = sorted((hit for hit, _ in best.values()), key=lambda h: -h.score)[:MAX_ADDED]
    paths = {mid: path for mid, (_, path) in best.items()}
    if not reached:
        return done(hits, {}, "skipped")
    # Stable: at equal scores a first-stage hit stays ahead of a reached one.
    merged = sorted([*hits, *reached], key=lambda h: -h.score)
    kept = {h.memory.id for h in merged[:limit]}
    joined = {k: v for k, v in paths.items() if k in kept}
    return done(merged, joined, "ran" if joined else "skipped")
