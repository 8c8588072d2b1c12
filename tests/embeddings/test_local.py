"""The local sentence-transformers embedder with the real all-MiniLM-L6-v2 weights, and its query cache."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from memvault.embeddings.base import QueryCache
from memvault.embeddings.local import LocalEmbedder, _Batch, _batches, _mean_pooling


def cosine(a: list[float], b: list[float]) -> float:
    va, vb = np.asarray(a), np.asarray(b)
    return float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb)))


class TestVectors:
    async def test_vectors_are_384_wide_and_unit_length(self, embedder: LocalEmbedder) -> None:
        vectors = await embedder.embed(["The user prefers dark roast coffee", "Deploys happen on Fridays"])

        assert len(vectors) == 2
        for v in vectors:
            assert len(v) == embedder.dim == 384
            assert all(isinstance(x, float) for x in v)
            assert np.linalg.norm(v) == pytest.approx(1.0, abs=1e-4)

    async def test_query_vector_matches_the_document_vector_of_the_same_text(self, embedder: LocalEmbedder) -> None:
        text = "Ana prefers window seats on long flights"
        [doc] = await embedder.embed([text])
        query = await embedder.embed_query(text)

        assert np.allclose(doc, query, atol=1e-5)

    async def test_empty_input_gives_no_vectors(self, embedder: LocalEmbedder) -> None:
        assert await embedder.embed([]) == []


class TestBatching:
    async def test_a_batch_of_100_equals_embedding_each_text_alone(self, embedder: LocalEmbedder) -> None:
        # Texts of very different lengths, so the batch is padded: padding must not change a vector.
        texts = [
            f"memory {i}: " + " ".join(["the user mentioned something about project alpha"] * (i % 7 + 1))
            for i in range(100)
        ]

        batched = await embedder.embed(texts)
        singles = [(await embedder.embed([t]))[0] for t in texts]

        assert len(batched) == 100
        assert np.allclose(np.asarray(batched), np.asarray(singles), atol=1e-5)

    async def test_a_batch_of_mixed_lengths_runs_little_padding_and_gives_the_models_vectors(
        self, embedder: LocalEmbedder
    ) -> None:
        """Conversation turns vary in length; padding every slice to the batch's longest text ran
        1.74x their real tokens on LoCoMo (issue 25). Each slice runs at its own longest text."""
        texts = [f"Turn {i}: " + "we talked about the trip to the lake house and " * (i % 9) + "ok" for i in range(40)]
        await embedder.embed(["load the model"])
        [order] = _batches(embedder._model, texts, 64)  # longest first, as embed runs them
        batch = _Batch([texts[i] for i in order], slice_tokens=256)
        while not batch.done:
            batch.step(embedder._model, embedder._single)

        assert batch.ran <= 1.25 * batch.tokens  # the batch padded to its longest: 2.6x here
        own = embedder._model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
        assert np.abs(np.asarray(batch.vectors) - own[order]).max() <= 1e-6

    async def test_order_follows_the_input(self, embedder: LocalEmbedder) -> None:
        a, b = "Ana prefers window seats", "The build uses Python 3.11"
        forward = await embedder.embed([a, b])
        backward = await embedder.embed([b, a])

        assert np.allclose(forward[0], backward[1], atol=1e-5)
        assert np.allclose(forward[1], backward[0], atol=1e-5)


class TestMeaning:
    async def test_paraphrases_are_closer_than_unrelated_sentences(self, embedder: LocalEmbedder) -> None:
        anchor, paraphrase, unrelated = await embedder.embed(
            [
                "The user prefers to sit by the window on long flights.",
                "On long-haul trips she likes a window seat.",
                "The quarterly tax report is due next Tuesday.",
            ]
        )

        assert cosine(anchor, paraphrase) > cosine(anchor, unrelated) + 0.2

    async def test_a_question_finds_its_answer_among_distractors(self, embedder: LocalEmbedder) -> None:
        query = await embedder.embed_query("what hot drink does the user like?")
        docs = await embedder.embed(
            [
                "The user prefers dark roast coffee in the morning.",
                "The staging database runs on port 5433.",
                "Ana's cat is called Miso.",
            ]
        )

        scores = [cosine(query, d) for d in docs]
        assert scores.index(max(scores)) == 0


class TestQueryCache:
    async def test_a_repeated_query_is_served_from_the_cache(self, embedder: LocalEmbedder) -> None:
        first = await embedder.embed_query("where does Ana like to sit on a plane? (cache test)")
        second = await embedder.embed_query("where does Ana like to sit on a plane? (cache test)")

        # The very same list object: the model did not run again.
        assert second is first

    async def test_a_cache_of_size_zero_embeds_every_time(self, embedder: LocalEmbedder) -> None:
        uncached = LocalEmbedder(embedder.model_id, dim=embedder.dim, cache_size=0)

        first = await uncached.embed_query("no cache here")
        second = await uncached.embed_query("no cache here")

        assert second is not first
        assert np.allclose(first, second, atol=1e-6)

    def test_least_recently_used_entry_is_evicted(self) -> None:
        cache = QueryCache(2)
        cache.put("a", [1.0])
        cache.put("b", [2.0])
        assert cache.get("a") == [1.0]  # "a" is now the most recently used

        cache.put("c", [3.0])

        assert cache.get("b") is None
        assert cache.get("a") == [1.0]
        assert cache.get("c") == [3.0]

    def test_putting_an_existing_query_refreshes_it_without_growing(self) -> None:
        cache = QueryCache(2)
        cache.put("a", [1.0])
        cache.put("b", [2.0])
        cache.put("a", [1.5])

        cache.put("c", [3.0])

        assert cache.get("a") == [1.5]
        assert cache.get("b") is None
        assert cache.get("c") == [3.0]

    def test_size_zero_keeps_nothing(self) -> None:
        cache = QueryCache(0)
        cache.put("a", [1.0])

        assert cache.get("a") is None

    def test_a_miss_returns_none(self) -> None:
        assert QueryCache(4).get("never stored") is None


class TestMisconfiguration:
    def test_a_dimension_that_does_not_match_the_model_fails_at_load(self, embedder: LocalEmbedder) -> None:
        wrong = LocalEmbedder(embedder.model_id, dim=768)

        with pytest.raises(ValueError, match="384-d"):
            wrong.load()


def files(folder: Path) -> list[Path]:
    return sorted(folder.iterdir())


LONG = "The quarterly tax report is due next Tuesday and the accountant wants the receipts. " * 40


@pytest.mark.slow  # exports the model to ONNX
class TestOnnxRuntime:
    """Texts run on ONNX Runtime, exported from the model on first load: single texts (search
    queries) through the micro-batcher, batches in their fair turns; torch where there is no
    session. Both must give the same vectors, or stored memories and queries would stop comparing."""

    async def test_a_batch_runs_on_the_onnx_session_with_the_vectors_of_torch(self, embedder: LocalEmbedder) -> None:
        """A batch of 10 cost 1.6x the CPU on torch (issue 25): its slices run on the session."""
        texts = [f"Memory {i}: " + "the user mentioned the lake house " * (i % 4 + 1) for i in range(10)]
        on_torch = LocalEmbedder(embedder.model_id, dim=embedder.dim, runtime="torch", cache_size=0)
        fresh = LocalEmbedder(embedder.model_id, dim=embedder.dim, cache_size=0)
        fresh._model, fresh._query_input = embedder._model, embedder._query_input
        rows: list[int] = []

        class Counting:
            def run(self, names: object, feeds: dict[str, np.ndarray]) -> object:
                rows.append(int(feeds["input_ids"].shape[0]))
                return embedder._single.run(names, feeds)

        fresh._single = Counting()

        vectors = await fresh.embed(texts)

        assert sum(rows) == len(texts)  # every text ran on the session, none on torch
        assert np.abs(np.asarray(vectors) - np.asarray(await on_torch.embed(texts))).max() <= 1e-6

    async def test_a_query_runs_on_onnx_and_matches_torch(self, embedder: LocalEmbedder) -> None:
        on_torch = LocalEmbedder(embedder.model_id, dim=embedder.dim, runtime="torch", cache_size=0)
        texts = ["Ana prefers window seats", "x", "What did Caroline research last year?", LONG]  # LONG: truncated

        onnx = [(await embedder.embed([t]))[0] for t in texts]
        torch = [(await on_torch.embed([t]))[0] for t in texts]

        assert embedder.runtime == "onnx" and on_torch.runtime == "torch"
        assert np.allclose(onnx, torch, atol=1e-5)
        assert np.allclose(np.linalg.norm(onnx, axis=1), 1.0, atol=1e-5)

    async def test_a_query_vector_matches_the_batch_vector_of_the_same_text(self, embedder: LocalEmbedder) -> None:
        texts = ["Deploys happen on Fridays", "The staging database runs on port 5433", LONG]
        batch = await embedder.embed(texts)  # fair-turn slices, padded to the batch's longest
        singles = [(await embedder.embed([t]))[0] for t in texts]  # the micro-batcher, each alone

        assert np.allclose(batch, singles, atol=1e-5)

    async def test_a_query_does_not_wait_behind_a_batch(self, embedder: LocalEmbedder) -> None:
        """A search's query runs from its own thread with its own tokenizer: an import's batch,
        seconds long, does not hold it up, though its slices run on the same ONNX Runtime session
        (which runs the two at once)."""
        texts = [f"Imported note {i}: the quarterly report mentions shipment {i * 7}" for i in range(400)]
        query = "When is the quarterly report due?"
        alone = (await embedder.embed([query]))[0]

        batch = asyncio.create_task(embedder.embed(texts))
        await asyncio.sleep(0.05)  # the batch's slices are running
        single = asyncio.create_task(embedder.embed([query]))
        done, _ = await asyncio.wait({batch, single}, return_when=asyncio.FIRST_COMPLETED)
        vectors = await batch

        assert done == {single}
        assert np.allclose(single.result()[0], alone, atol=1e-6)
        assert len(vectors) == len(texts)

    async def test_queries_and_batches_at_once_give_their_own_vectors(self, embedder: LocalEmbedder) -> None:
        queries = [f"Question {i}: who adopted the greyhound named Biscuit?" for i in range(12)]
        batches = [[f"Memory {b}-{i} about a greyhound" for i in range(40)] for b in range(2)]
        expected_q = [(await embedder.embed([q]))[0] for q in queries]
        expected_b = [await embedder.embed(b) for b in batches]

        results = await asyncio.gather(*(embedder.embed(b) for b in batches), *(embedder.embed([q]) for q in queries))

        assert np.allclose(results[: len(batches)], expected_b, atol=1e-5)
        assert np.allclose([r[0] for r in results[len(batches) :]], expected_q, atol=1e-6)

    async def test_the_export_is_made_once_and_reused(self, embedder: LocalEmbedder, tmp_path: Path) -> None:
        first = LocalEmbedder(embedder.model_id, dim=embedder.dim, onnx_dir=tmp_path)
        first.load()
        [exported] = files(tmp_path)
        made = exported.stat().st_mtime_ns

        second = LocalEmbedder(embedder.model_id, dim=embedder.dim, onnx_dir=tmp_path)
        second.load()

        assert first.runtime == second.runtime == "onnx"
        assert files(tmp_path) == [exported]  # one model file, no partial one left behind
        assert exported.stat().st_mtime_ns == made
        assert np.allclose(await first.embed(["reused"]), await second.embed(["reused"]), atol=1e-6)

    async def test_batches_after_an_export_are_the_batches_without_one(
        self, embedder: LocalEmbedder, tmp_path: Path
    ) -> None:
        # A fresh export (a new install's first start) left the shared transformer in training
        # mode, dropout on: every batch vector came out random (fresh-clone CI caught it).
        texts = ["Ana prefers window seats", "The build uses Python 3.11", "Deploys happen on Fridays"]
        fresh = LocalEmbedder(embedder.model_id, dim=embedder.dim, onnx_dir=tmp_path)
        fresh.load()

        assert files(tmp_path)  # it exported
        assert np.allclose(await fresh.embed(texts), await embedder.embed(texts), atol=1e-6)
        assert np.allclose(await fresh.embed(texts), await fresh.embed(texts), atol=0)

    async def test_an_export_that_fails_leaves_the_model_on_torch(
        self, embedder: LocalEmbedder, tmp_path: Path
    ) -> None:
        blocked = tmp_path / "not-a-folder"
        blocked.write_text("a file where the ONNX folder should be")
        fallback = LocalEmbedder(embedder.model_id, dim=embedder.dim, onnx_dir=blocked)

        vector = await fallback.embed_query("still embedded")

        assert fallback.runtime == "torch"
        assert np.allclose(vector, await embedder.embed_query("still embedded"), atol=1e-5)

    @pytest.mark.parametrize(
        ("config", "mean"),
        [
            ({"embedding_dimension": 384, "pooling_mode": "mean", "include_prompt": True}, True),
            ({"embedding_dimension": 384, "pooling_mode": "cls"}, False),
            ({"pooling_mode": "mean", "include_prompt": False}, False),
            ({"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False}, True),
            ({"pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True}, False),
            ({"pooling_mode_cls_token": True}, False),
        ],
    )
    def test_only_plain_mean_pooling_is_exported(self, config: dict[str, object], mean: bool) -> None:
        assert _mean_pooling(config) is mean


@pytest.fixture(scope="module")
def int8(embedder: LocalEmbedder, tmp_path_factory: pytest.TempPathFactory) -> LocalEmbedder:
    emb = LocalEmbedder(
        embedder.model_id, dim=embedder.dim, cache_size=0, onnx_dir=tmp_path_factory.mktemp("onnx"), quantize="int8"
    )
    emb.load()
    return emb


@pytest.mark.slow  # exports and quantizes the model
class TestInt8:
    """``quantize="int8"`` (issue 25): about 2.5x less CPU per text, vectors close to float32's but
    not equal, so they are another model's in what is stored with them."""

    async def test_int8_vectors_are_stored_under_a_model_id_of_their_own(
        self, embedder: LocalEmbedder, int8: LocalEmbedder
    ) -> None:
        assert int8.runtime == "onnx"
        assert int8.model_id == f"{embedder.model_id}+int8" != embedder.model_id

    async def test_int8_vectors_stay_close_to_float32s(self, embedder: LocalEmbedder, int8: LocalEmbedder) -> None:
        texts = [
            "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
            "Melanie: We took the kids camping near the lake last weekend!",
            "What did Caroline research last year?",
            LONG,
        ]

        quantized, exact = np.asarray(await int8.embed(texts)), np.asarray(await embedder.embed(texts))

        cosines = (quantized * exact).sum(axis=1)
        assert cosines.min() > 0.97  # 0.98 at worst over 3,000 LoCoMo turns (docs/benchmarks.md)
        assert not np.allclose(quantized, exact, atol=1e-3)  # it did run the int8 graph
        assert np.allclose(np.linalg.norm(quantized, axis=1), 1.0, atol=1e-5)

    async def test_an_int8_query_matches_the_int8_batch_vector_of_the_same_text(self, int8: LocalEmbedder) -> None:
        texts = ["Deploys happen on Fridays", "The staging database runs on port 5433", LONG]

        batch = await int8.embed(texts)
        singles = [(await int8.embed([t]))[0] for t in texts]

        # Activations are quantized per run, by the whole run's range: the padding and the rows
        # beside a text move its int8 vector about as far as int8 is from float32 (a short text
        # padded to 256 tokens here: 0.991). Not equal, as float32's are (TestOnnxRuntime).
        cosines = (np.asarray(batch) * np.asarray(singles)).sum(axis=1)
        assert cosines.min() > 0.98
        assert cosines[2] > 0.999999  # the longest text, unpadded in both

    def test_the_int8_file_is_made_once_beside_the_export_and_named_by_its_options(
        self, embedder: LocalEmbedder, int8: LocalEmbedder, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        folder = int8._onnx_dir
        # The float32 export it was made from, and the int8 file beside it.
        [quantized] = [f for f in files(folder) if ".int8-" in f.name]
        [exported] = [f for f in files(folder) if f != quantized]
        assert quantized.name.startswith(f"{exported.stem}.int8-")
        made = quantized.stat().st_mtime_ns

        again = LocalEmbedder(embedder.model_id, dim=embedder.dim, onnx_dir=folder, quantize="int8")
        again.load()
        assert sorted(files(folder)) == sorted([exported, quantized]) and quantized.stat().st_mtime_ns == made

        monkeypatch.setattr("memvault.embeddings.local._QUANTIZE_VERSION", 999)
        changed = LocalEmbedder(embedder.model_id, dim=embedder.dim, onnx_dir=folder, quantize="int8")
        changed.load()
        assert len(files(folder)) == 3  # other options: a file of their own, the old one not reused

    def test_a_quantization_that_fails_fails_the_load_rather_than_run_torch_under_the_int8_id(
        self, embedder: LocalEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def broken(*args: object, **kwargs: object) -> None:
            raise RuntimeError("quantizer broke")

        monkeypatch.setattr("onnxruntime.quantization.quantize_dynamic", broken)
        failing = LocalEmbedder(embedder.model_id, dim=embedder.dim, onnx_dir=tmp_path, quantize="int8")

        with pytest.raises(RuntimeError, match=r"\+int8: no int8 session"):
            failing.load()
        assert not [f for f in files(tmp_path) if ".int8-" in f.name]  # nothing half-written left

    def test_int8_needs_the_onnx_runtime(self, embedder: LocalEmbedder) -> None:
        with pytest.raises(ValueError, match="needs runtime=onnx"):
            LocalEmbedder(embedder.model_id, dim=embedder.dim, runtime="torch", quantize="int8")
