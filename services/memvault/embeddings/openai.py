"""Any OpenAI-compatible /embeddings endpoint, over httpx."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import httpx

from memvault.embeddings.base import EmbeddingUnavailable, QueryCache
from memvault.metering.tally import count
from memvault.observability.metrics import observed_embedding


class OpenAIEmbedder:
    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None,
        dim: int,
        batch_size: int = 64,
        timeout_s: float = 30.0,
        cache_size: int = 2048,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.model_id = model
        self.dim = dim
        self._batch_size = batch_size
        self._cache = QueryCache(cache_size)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s, transport=transport
        )

    async def _batch(self, texts: list[str]) -> list[list[float]]:
        # `dimensions` lets text-embedding-3 models shorten to the schema's width.
        payload = {"model": self.model_id, "input": texts, "dimensions": self.dim, "encoding_format": "float"}
        try:
            resp = await self._client.post("/embeddings", json=payload)
            resp.raise_for_status()
            body = resp.json()
            data = sorted(body["data"], key=lambda d: d["index"])
            vectors = [list(map(float, d["embedding"])) for d in data]
        except (httpx.HTTPError, KeyError, TypeError, ValueError) as exc:
            raise EmbeddingUnavailable(f"embedding provider failed: {type(exc).__name__}") from exc
        if len(vectors) != len(texts) or any(len(v) != self.dim for v in vectors):
            raise EmbeddingUnavailable(f"embedding provider returned vectors of the wrong shape (want {self.dim}-d)")
        # The provider's own count; one that reports none is counted by the usual estimate.
        usage = body.get("usage") if isinstance(body, dict) else None
        tokens = usage.get("total_tokens") if isinstance(usage, dict) else None
        count(tokens_embedded=tokens if isinstance(tokens, int) else sum(len(t) // 4 + 1 for t in texts))
        return vectors

    @observed_embedding("openai")
    async def embed(self, texts: Sequence[str], *, tenant: Hashable | None = None) -> list[list[float]]:
        # No shared model here to take turns at: each call's requests go out on their own.
        out: list[list[float]] = []
        for i in range(0, len(texts), self._batch_size):
            out.extend(await self._batch(list(texts[i : i + self._batch_size])))
        return out

    async def embed_query(self, text: str) -> list[float]:
        return await self._cache.get_or_embed(text, self._batch)

    async def aclose(self) -> None:
        await self._client.aclose()
