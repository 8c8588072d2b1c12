"""The second stage of search, best effort around the first: a query rewrite (HyDE) before
retrieval and a reranker after fusion. Each runs when configured unless the request says false,
and a failure of either is reported in the metrics and never breaks the search: the query's own
vector and the first-stage order are served instead.

NamespaceAPI.search makes one ``SecondStage`` per request and calls it at three points: the query
vector, how many fused hits to fetch, and the hits to return."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

from memvault.embeddings import Embedder, EmbeddingUnavailable
from memvault.retrieval.hits import Hit
from memvault.retrieval.rerank import Reranker, RerankUnavailable
from memvault.retrieval.rewrite import QueryRewriter, RewriteUnavailable

log = logging.getLogger(__name__)


@dataclass
class SecondStage:
    reranker: Reranker | None
    rewriter: QueryRewriter | None
    rerank_candidates: int
    rerank: bool | None = None
    rewrite: bool | None = None
    # What happened, for SearchMetrics: stages, timings_ms and backend_failures.
    stages: dict[str, str] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name, provider, wanted in (
            ("rewrite", self.rewriter, self.rewrite),
            ("rerank", self.reranker, self.rerank),
        ):
            self.stages[name] = "off" if wanted is False else "unconfigured" if provider is None else "skipped"

    @property
    def rewriting(self) -> bool:
        return self.rewriter is not None and self.rewrite is not False

    @property
    def reranking(self) -> bool:
        return self.reranker is not None and self.rerank is not False

    def fetch(self, limit: int) -> int:
        """How many fused hits to ask the first stage for: the reranker's candidates, at least ``limit``."""
        return max(limit, self.rerank_candidates) if self.reranking else limit

    async def query_vector(self, query: str, qvec: list[float] | None, embedder: Embedder) -> list[float] | None:
        """The dense channel's vector: the query's own, or with a rewriter the normalised mean of
        the query's and a hypothetical answer's.

        The mean rather than embedding "query + passage" as one text: the query keeps half the
        weight however long the passage runs (mean pooling would let the passage's tokens
        outvote it, and a long passage would push the query out of the model's window), and
        averaging is what the HyDE paper does with the query and its hypothetical documents."""
        if not self.rewriting or self.rewriter is None:  # the second half tells the type checker
            return qvec
        if qvec is None:
            return None  # no dense channel to help: the embedder is down, stage stays "skipped"
        started = time.perf_counter()
        try:
            passage = await self.rewriter.rewrite(query)
            [pvec] = await embedder.embed([passage])
        except (RewriteUnavailable, EmbeddingUnavailable) as exc:
            log.warning("query rewrite failed (%s: %s); searching with the query alone", type(exc).__name__, exc)
            self._failed("rewrite", started)
            return qvec
        self._ran("rewrite", started)
        mean = [(a + b) / 2 for a, b in zip(qvec, pvec, strict=True)]
        norm = math.sqrt(sum(x * x for x in mean)) or 1.0
        return [x / norm for x in mean]

    async def rerank_hits(self, query: str, hits: list[Hit], limit: int) -> list[Hit]:
        """The hits to return: with a reranker, the first ``rerank_candidates`` reordered by its
        score on the memory's content (ties keep their first-stage order), then any others in
        first-stage order, cut to ``limit``. Each reranked hit gets a ``rerank`` channel."""
        reranker = self.reranker
        if reranker is None or self.rerank is False or not hits:
            return hits[:limit]
        head, rest = hits[: self.rerank_candidates], hits[self.rerank_candidates :]
        started = time.perf_counter()
        try:
            scores = await reranker.score(query, [h.memory.content for h in head])
            if len(scores) != len(head):
                raise RerankUnavailable(f"reranker returned {len(scores)} scores for {len(head)} documents")
        except RerankUnavailable as exc:
            log.warning("rerank failed (%s); serving the first-stage order", exc)
            self._failed("rerank", started)
            return hits[:limit]
        self._ran("rerank", started)
        for h, s in zip(head, scores, strict=True):
            # Competition ranking, as the first-stage channels rank: equal scores share a rank.
            h.channels["rerank"] = (1 + sum(other > s for other in scores), round(s, 6))
        ordered = sorted(head, key=lambda h: h.channels["rerank"][0] or 0)
        return (ordered + rest)[:limit]

    def _ran(self, name: str, started: float) -> None:
        self.stages[name] = "ran"
        self.timings_ms[name] = round((time.perf_counter() - started) * 1000, 2)

    def _failed(self, name: str, started: float) -> None:
        self.stages[name] = "failed"
        self.timings_ms[name] = round((time.perf_counter() - started) * 1000, 2)
        self.failures.append(name)
