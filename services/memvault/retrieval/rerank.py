"""Rerankers for the second stage of search: score (query, memory) pairs jointly, which a
bi-encoder's vectors cannot, and reorder the best first-stage hits by that score.

Two providers behind one interface: a sentence-transformers cross-encoder on this machine, or any
server speaking the ``/rerank`` wire format of Cohere and Jina. Whatever goes wrong raises
``RerankUnavailable``; search then serves the first-stage order (retrieval/stages.py)."""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
from pathlib import Path
from typing import Any, Protocol

import httpx
from pydantic import BaseModel, Field

from memvault.config import Settings
from memvault.retrieval.provider import json_client, post_for

log = logging.getLogger(__name__)


class RerankUnavailable(Exception):
    """The reranker gave no usable scores: not loaded, no answer in time, an HTTP error, or an
    answer that does not score every document exactly once."""


class Reranker(Protocol):
    model_id: str

    async def score(self, query: str, documents: list[str]) -> list[float]:
        """One relevance score per document, in the documents' order; higher is more relevant."""
        ...

    async def aclose(self) -> None: ...


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder by model name or local path, on this machine's CPU."""

    def __init__(self, model: str, *, timeout_s: float = 5.0) -> None:
        self.model_id = model
        self._timeout_s = timeout_s
        self.model: Any = None
        self._load_lock = threading.Lock()
        # One inference at a time, as for the embedder: torch already spreads a batch over every core.
        self._infer_lock = asyncio.Lock()
        self._late: set[asyncio.Future[list[float]]] = set()

    def load(self) -> None:
        """Load the model now (blocking), so the first search does not pay for it."""
        with self._load_lock:
            if self.model is not None:
                return
            from sentence_transformers import CrossEncoder

            # A local folder needs no hub, and HF_HUB_OFFLINE forbids one: without local_files_only
            # transformers may still try to reach the hub and wait for a timeout before giving up.
            offline = Path(self.model_id).exists() or os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true")
            self.model = CrossEncoder(self.model_id, device="cpu", local_files_only=offline)
            log.info("loaded cross-encoder %s", self.model_id)

    def _predict(self, query: str, documents: list[str]) -> list[float]:
        self.load()
        scores = self.model.predict([(query, d) for d in documents], convert_to_numpy=True, show_progress_bar=False)
        return [float(s) for s in scores]

    async def _infer(self, query: str, documents: list[str]) -> list[float]:
        async with self._infer_lock:
            return await asyncio.to_thread(self._predict, query, documents)

    async def score(self, query: str, documents: list[str]) -> list[float]:
        if not documents:
            return []
        task = asyncio.ensure_future(self._infer(query, documents))
        try:
            async with asyncio.timeout(self._timeout_s):
                return await asyncio.shield(task)
        except TimeoutError as exc:
            # A thread cannot be stopped: the shielded task holds the lock until its inference
            # ends, so later searches queue behind it (each within its own timeout) instead of
            # piling more inferences onto the CPU.
            self._late.add(task)
            task.add_done_callback(self._forget)
            raise RerankUnavailable(f"cross-encoder took longer than {self._timeout_s}s") from exc
        except Exception as exc:  # a model that cannot load or predict fails the stage, not the search
            raise RerankUnavailable(f"cross-encoder failed: {type(exc).__name__}: {exc}"[:500]) from exc

    def _forget(self, task: asyncio.Future[list[float]]) -> None:
        self._late.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("a timed-out cross-encoder inference failed too", exc_info=task.exception())

    async def aclose(self) -> None:
        return None


class _Ranked(BaseModel):
    index: int = Field(ge=0)
    relevance_score: float


class _RerankAnswer(BaseModel):
    results: list[_Ranked]


class HTTPReranker:
    """``POST {base_url}/rerank`` as Cohere (v2) and Jina define it, which vLLM and Infinity
    servers also speak: ``{"model", "query", "documents", "top_n"}`` in,
    ``{"results": [{"index", "relevance_score"}]}`` out."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None,
        timeout_s: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.model_id = model
        self._client = json_client(base_url, api_key, timeout_s, transport)

    async def score(self, query: str, documents: list[str]) -> list[float]:
        if not documents:
            return []
        payload = {"model": self.model_id, "query": query, "documents": documents, "top_n": len(documents)}
        answer = await post_for(
            self._client, "rerank", payload, _RerankAnswer, fail=RerankUnavailable, who="rerank provider"
        )
        scores: list[float | None] = [None] * len(documents)
        for ranked in answer.results:
            if ranked.index >= len(documents) or scores[ranked.index] is not None:
                raise RerankUnavailable(f"rerank provider answered index {ranked.index} out of range or twice")
            if not math.isfinite(ranked.relevance_score):
                raise RerankUnavailable("rerank provider answered a score that is not a finite number")
            scores[ranked.index] = ranked.relevance_score
        # A partial answer cannot order the rest: ranking unscored documents last would be a guess.
        if any(s is None for s in scores):
            raise RerankUnavailable(f"rerank provider scored {sum(s is not None for s in scores)} of {len(documents)}")
        return [s for s in scores if s is not None]

    async def aclose(self) -> None:
        await self._client.aclose()


def build_reranker(settings: Settings) -> Reranker | None:
    """The configured reranker, or None when ``rerank_provider`` is ``none``. Nothing is loaded or
    connected here: the cross-encoder loads on ``load()`` or its first search."""
    if settings.rerank_provider == "cross-encoder":
        return CrossEncoderReranker(settings.rerank_model, timeout_s=settings.rerank_timeout_s)
    if settings.rerank_provider == "http":
        if not settings.rerank_base_url:
            raise ValueError("MEMVAULT_RERANK_BASE_URL is required with MEMVAULT_RERANK_PROVIDER=http")
        key = settings.rerank_api_key.get_secret_value() if settings.rerank_api_key else None
        return HTTPReranker(
            settings.rerank_model,
            base_url=settings.rerank_base_url,
            api_key=key,
            timeout_s=settings.rerank_timeout_s,
        )
    return None
