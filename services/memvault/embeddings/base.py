"""The Embedder interface: batched, asynchronous, never blocking the event loop."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Protocol

from memvault.errors import Unavailable


class EmbeddingUnavailable(Unavailable):
    code = "embedding_unavailable"
    title = "Embedding provider unavailable"


class Embedder(Protocol):
    # Read-only: a wrapper (jobs/runner.py's LoopBoundEmbedder) passes its model's id through.
    @property
    def model_id(self) -> str: ...

    dim: int

    async def embed(self, texts: Sequence[str], *, tenant: Hashable | None = None) -> list[list[float]]:
        """Embed documents in batches; vectors are L2-normalised. ``tenant`` is whose work it is:
        a model shared by tenants serves them in turns (a call naming none is a tenant of its own)."""
        ...

    async def embed_query(self, text: str) -> list[float]:
        """Embed one search query (cached by implementations that can)."""
        ...

    async def aclose(self) -> None: ...


class QueryCache:
    """A small LRU of query embeddings: repeated queries skip the model entirely."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[str, list[float]] = OrderedDict()

    def get(self, text: str) -> list[float] | None:
        vec = self._items.get(text)
        if vec is not None:
            self._items.move_to_end(text)
        return vec

    async def get_or_embed(self, text: str, embed: Callable[[list[str]], Awaitable[list[list[float]]]]) -> list[float]:
        vec = self.get(text)
        if vec is None:
            vec = (await embed([text]))[0]
            self.put(text, vec)
        return vec

    def put(self, text: str, vec: list[float]) -> None:
        if self._size <= 0:
            return
        self._items[text] = vec
        self._items.move_to_end(text)
        while len(self._items) > self._size:
            self._items.popitem(last=False)
