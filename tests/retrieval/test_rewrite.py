"""The HyDE query rewrite as a client sees it, against a chat-completions stub on 127.0.0.1: the
dense channel searches with the query and the stub's hypothetical answer (so a query whose words
match nothing finds the memory the answer describes), the full-text channel keeps the user's
words, and a malformed, empty, failing or slow answer leaves the search as it would be without."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from memvault.retrieval.rewrite import HyDERewriter, build_rewriter
from tests.conftest import Tenant
from tests.memories.test_router import search, store
from tests.retrieval.stubs import TIMEOUT_S, Stub, app_client, waiting_search_transactions

PET = "Caro adopted a greyhound named Biscuit last spring"
NOTES = [
    PET,
    "The quarterly report is due on Friday",
    "The staging cluster lives in eu-west-1",
    "Ana prefers window seats on long flights",
]
# No word of it is in any note (full text finds nothing), and its vector alone is far from PET.
QUERY = "who joined the household?"
PASSAGE = "Caro adopted a greyhound puppy named Biscuit."
MIN_SCORE = 0.4


class ChatStub(Stub):
    """Answers every chat completion with ``passage``."""

    def __init__(self) -> None:
        self.passage = PASSAGE
        super().__init__("/v1/chat/completions", self._answer, malformed='{"choices": [{"message": ')

    def _answer(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": self.passage}, "finish_reason": "stop"}
            ],
        }


@pytest.fixture(scope="module")
def stub() -> Iterator[ChatStub]:
    s = ChatStub()
    yield s
    s.close()


@pytest.fixture(scope="module")
async def rewriting(
    settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder, stub: ChatStub
) -> AsyncIterator[httpx.AsyncClient]:
    """The app with `MEMVAULT_REWRITE_PROVIDER=hyde` pointed at the stub."""
    async with app_client(
        settings,
        pg_urls,
        embedder,
        rewrite_provider="hyde",
        rewrite_base_url=stub.base_url,
        rewrite_model="stub-model",
        rewrite_api_key=SecretStr("stub-key"),
        rewrite_timeout_s=TIMEOUT_S,
    ) as c:
        yield c


def contents(out: dict[str, Any]) -> list[str]:
    return [r["memory"]["content"] for r in out["results"]]


async def blended_cosine(embedder: LocalEmbedder, query: str, passage: str, memory: str) -> float:
    """What the dense channel should score: the memory against the normalised mean of the query's
    and the passage's vectors, computed here from the model directly."""
    q, p, m = await embedder.embed([query, passage, memory])
    mean = [(a + b) / 2 for a, b in zip(q, p, strict=True)]
    norm = math.sqrt(sum(x * x for x in mean))
    return sum(x / norm * y for x, y in zip(mean, m, strict=True))


@pytest.mark.slow  # an app of its own with a chat stub
class TestHyDE:
    async def test_the_hypothetical_answer_finds_what_the_words_cannot(
        self, rewriting: httpx.AsyncClient, stub: ChatStub, embedder: LocalEmbedder, tenant_a: Tenant
    ) -> None:
        for note in NOTES:
            await store(rewriting, tenant_a, note)
        seen = len(stub.requests)

        plain = await search(rewriting, tenant_a, QUERY, rewrite=False, min_score=MIN_SCORE)
        out = await search(rewriting, tenant_a, QUERY, min_score=MIN_SCORE)

        assert plain["results"] == [] and plain["metrics"]["stages"]["rewrite"] == "off"
        assert contents(out) == [PET]
        [hit] = out["results"]
        assert hit["semantic_relevance"] == pytest.approx(await blended_cosine(embedder, QUERY, PASSAGE, PET), abs=1e-4)
        # The passage shares words with PET, but full text searched the user's words only.
        assert hit["signals"]["lexical_rank"] is None and out["metrics"]["candidates"]["lexical"] == 0
        assert out["metrics"]["stages"] == {"rewrite": "ran", "rerank": "unconfigured"}
        assert "rewrite" in out["metrics"]["timings_ms"] and out["metrics"]["backend_failures"] == []
        [request] = stub.requests[seen:]
        assert request["model"] == "stub-model" and request["temperature"] == 0
        assert request["messages"][0]["role"] == "system"
        assert request["messages"][1] == {"role": "user", "content": QUERY}
        assert stub.headers[seen]["Authorization"] == "Bearer stub-key"

    async def test_without_min_score_the_rewrite_moves_the_memory_to_the_top(
        self, rewriting: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        for note in NOTES:
            await store(rewriting, tenant_a, note)

        plain = await search(rewriting, tenant_a, QUERY, rewrite=False)
        out = await search(rewriting, tenant_a, QUERY)

        assert contents(plain)[0] != PET
        assert contents(out)[0] == PET

    @pytest.mark.parametrize("mode", ["malformed", "empty", "error", "slow"])
    async def test_a_failing_rewrite_searches_with_the_query_alone(
        self, rewriting: httpx.AsyncClient, stub: ChatStub, tenant_a: Tenant, mode: str
    ) -> None:
        for note in NOTES:
            await store(rewriting, tenant_a, note)
        plain = await search(rewriting, tenant_a, QUERY, rewrite=False)
        if mode == "empty":
            stub.passage = "  "
        else:
            stub.mode = mode
        try:
            out = await search(rewriting, tenant_a, QUERY)
        finally:
            stub.mode, stub.passage = "good", PASSAGE

        assert contents(out) == contents(plain)
        assert [r["semantic_relevance"] for r in out["results"]] == [r["semantic_relevance"] for r in plain["results"]]
        assert out["metrics"]["stages"]["rewrite"] == "failed"
        assert out["metrics"]["backend_failures"] == ["rewrite"]
        assert out["metrics"]["timings_ms"]["rewrite"] < 1000 * (TIMEOUT_S + 0.5)

    async def test_no_search_transaction_waits_on_the_model(
        self, rewriting: httpx.AsyncClient, stub: ChatStub, pg_urls: DatabaseUrls, tenant_a: Tenant
    ) -> None:
        """The search reads the namespace while the query is embedded, but the rewrite is a remote
        call of up to its timeout: it is done before the search's transaction opens."""
        await store(rewriting, tenant_a, PET)
        waiting: list[list[str]] = []
        stub.on_answer = lambda: waiting.append(waiting_search_transactions(pg_urls))
        try:
            out = await search(rewriting, tenant_a, QUERY)
        finally:
            stub.on_answer = None

        assert out["metrics"]["stages"]["rewrite"] == "ran" and contents(out)[0] == PET
        assert waiting == [[]]

    async def test_other_tenant_sees_nothing(
        self, rewriting: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        await store(rewriting, tenant_a, PET)

        out = await search(rewriting, tenant_b, QUERY)

        assert out["results"] == [] and out["metrics"]["stages"]["rewrite"] == "ran"


class TestBuild:
    def test_build_rewriter_follows_the_settings(self) -> None:
        base = Settings(_env_file=None)

        assert build_rewriter(base) is None
        rewriter = build_rewriter(base.model_copy(update={"rewrite_provider": "hyde", "rewrite_model": "m"}))
        assert isinstance(rewriter, HyDERewriter) and rewriter.model_id == "m"
