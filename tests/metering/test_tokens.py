"""Tokens embedded are the model tokenizer's own count (padding not counted), for a batch and for
a single text alike, and a cached query embeds nothing."""

from __future__ import annotations

from memvault.embeddings.local import LocalEmbedder
from memvault.metering.tally import Tally, tallying


def real_tokens(embedder: LocalEmbedder, text: str) -> int:
    return int(embedder._model.tokenize([text])["attention_mask"].sum())


async def test_tokens_are_the_tokenizers_count(embedder: LocalEmbedder) -> None:
    texts = ["Short.", "A much longer sentence about the garden, the lake and the long summer evenings."]
    with tallying(Tally()) as batch:
        await embedder.embed(texts)
    assert batch.tokens_embedded == sum(real_tokens(embedder, t) for t in texts)

    with tallying(Tally()) as single:
        await embedder.embed([texts[1]])
    assert single.tokens_embedded == real_tokens(embedder, texts[1])

    query = "where is the lake house? (metering test)"
    with tallying(Tally()) as queries:
        await embedder.embed_query(query)
        await embedder.embed_query(query)  # from the query cache: no model run
    assert queries.tokens_embedded == real_tokens(embedder, query)
