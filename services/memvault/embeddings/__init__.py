"""Embedding providers behind one interface, chosen by settings."""

from __future__ import annotations

from memvault.config import Settings
from memvault.embeddings.base import Embedder, EmbeddingUnavailable

__all__ = ["Embedder", "EmbeddingUnavailable", "build_embedder"]


def build_embedder(settings: Settings) -> Embedder:
    if settings.embedding_provider == "openai":
        from memvault.embeddings.openai import OpenAIEmbedder

        key = settings.embedding_api_key.get_secret_value() if settings.embedding_api_key else None
        return OpenAIEmbedder(
            settings.embedding_model,
            base_url=settings.embedding_base_url,
            api_key=key,
            dim=settings.embedding_dim,
            batch_size=settings.embedding_batch_size,
            timeout_s=settings.embedding_timeout_s,
            cache_size=settings.query_cache_size,
        )
    from memvault.embeddings.local import LocalEmbedder

    return LocalEmbedder(
        settings.embedding_model,
        dim=settings.embedding_dim,
        batch_size=settings.embedding_batch_size,
        cache_size=settings.query_cache_size,
        runtime=settings.embedding_runtime,
        onnx_dir=settings.embedding_onnx_dir,
        slice_tokens=settings.embedding_slice_tokens,
        quantize=settings.embedding_quantize,
    )
