"""The OpenAI-compatible embedder against a stub provider: a real HTTP server on 127.0.0.1 speaking the
OpenAI /embeddings wire format. Also the whole app with a failing provider: search degrades to words,
storing refuses with 503 and stores nothing."""

from __future__ import annotations

import asyncio
import json
import math
import random
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings import build_embedder
from memvault.embeddings.base import EmbeddingUnavailable
from memvault.embeddings.openai import OpenAIEmbedder
from memvault.metering.tally import Tally, tallying
from tests.conftest import Tenant, running

API_KEY = "sk-test-0123456789"
MODEL = "text-embedding-3-small"
DIM = 384


def fake_vector(text: str, dim: int) -> list[float]:
    """A deterministic unit vector per text, like a real provider's."""
    rng = random.Random(text)
    v = [rng.gauss(0, 1) for _ in range(dim)]
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


@dataclass
class SeenRequest:
    path: str
    authorization: str | None
    body: dict[str, Any]


@dataclass
class StubProvider:
    """POST /v1/embeddings in the OpenAI format. `mode` picks the behaviour of the next requests:
    ok, reversed (data out of index order), error (HTTP 500), malformed (200 with broken JSON),
    wrong_dim (vectors of 3 floats), short (one vector too few), slow (answers after `delay_s`)."""

    mode: str = "ok"
    delay_s: float = 2.0
    requests: list[SeenRequest] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    def start(self) -> StubProvider:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def _send(self, status: int, raw: bytes, content_type: str = "application/json") -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                stub.requests.append(SeenRequest(self.path, self.headers.get("Authorization"), body))
                if self.path != "/v1/embeddings":
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                if self.headers.get("Authorization") != f"Bearer {API_KEY}":
                    self._send(
                        401, b'{"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}'
                    )
                    return
                mode = stub.mode
                if mode == "error":
                    self._send(500, b'{"error": {"message": "The server had an error", "type": "server_error"}}')
                    return
                if mode == "malformed":
                    self._send(200, b'{"data": [{"index": 0, "embedding": [0.1, ')
                    return
                if mode == "slow":
                    time.sleep(stub.delay_s)
                texts = body["input"]
                dim = 3 if mode == "wrong_dim" else int(body.get("dimensions") or DIM)
                data = [
                    {"object": "embedding", "index": i, "embedding": fake_vector(t, dim)} for i, t in enumerate(texts)
                ]
                if mode == "reversed":
                    data.reverse()
                if mode == "short":
                    data = data[:-1]
                answer = {
                    "object": "list",
                    "data": data,
                    "model": body.get("model"),
                    "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
                }
                self._send(200, json.dumps(answer).encode())

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"


@pytest.fixture
def provider() -> Iterator[StubProvider]:
    stub = StubProvider().start()
    yield stub
    stub.stop()


@pytest.fixture
async def make_embedder(provider: StubProvider) -> AsyncIterator[Callable[..., OpenAIEmbedder]]:
    made: list[OpenAIEmbedder] = []

    def make(**overrides: Any) -> OpenAIEmbedder:
        kwargs: dict[str, Any] = {"base_url": provider.base_url, "api_key": API_KEY, "dim": DIM}
        kwargs.update(overrides)
        emb = OpenAIEmbedder(MODEL, **kwargs)
        made.append(emb)
        return emb

    yield make
    for emb in made:
        await emb.aclose()


class TestWireFormat:
    async def test_sends_key_model_input_and_dimensions(
        self, provider: StubProvider, make_embedder: Callable[..., OpenAIEmbedder]
    ) -> None:
        emb = make_embedder()

        vectors = await emb.embed(["first text", "second text"])

        assert vectors == [fake_vector("first text", DIM), fake_vector("second text", DIM)]
        [seen] = provider.requests
        assert seen.path == "/v1/embeddings"
        assert seen.authorization == f"Bearer {API_KEY}"
        assert seen.body["model"] == MODEL
        assert seen.body["input"] == ["first text", "second text"]
        assert seen.body["dimensions"] == DIM

    async def test_a_trailing_slash_in_the_base_url_is_harmless(
        self, provider: StubProvider, make_embedder: Callable[..., OpenAIEmbedder]
    ) -> None:
        emb = make_embedder(base_url=provider.base_url + "/")

        await emb.embed(["x"])

        assert provider.requests[0].path == "/v1/embeddings"

    async def test_settings_build_this_embedder(self, provider: StubProvider) -> None:
        settings = Settings(
            _env_file=None,
            embedding_provider="openai",
            embedding_model=MODEL,
            embedding_base_url=provider.base_url,
            embedding_api_key=API_KEY,
            embedding_batch_size=2,
        )
        emb = build_embedder(settings)
        try:
            vectors = await emb.embed(["a", "b", "c"])
        finally:
            await emb.aclose()

        assert emb.model_id == MODEL
        assert vectors == [fake_vector(t, DIM) for t in "abc"]
        assert [r.body["input"] for r in provider.requests] == [["a", "b"], ["c"]]
        assert {r.authorization for r in provider.requests} == {f"Bearer {API_KEY}"}

    async def test_empty_input_sends_no_request(
        self, provider: StubProvider, make_embedder: Callable[..., OpenAIEmbedder]
    ) -> None:
        assert await make_embedder().embed([]) == []
        assert provider.requests == []


class TestBatching:
    async def test_five_texts_in_batches_of_two_take_three_requests(
        self, provider: StubProvider, make_embedder: Callable[..., OpenAIEmbedder]
    ) -> None:
        texts = ["t0", "t1", "t2", "t3", "t4"]

        vectors = await make_embedder(batch_size=2).embed(texts)

        assert [r.body["input"] for r in provider.requests] == [["t0", "t1"], ["t2", "t3"], ["t4"]]
        assert vectors == [fake_vector(t, DIM) for t in texts]

    async def test_order_follows_index_when_the_provider_answers_out_of_order(
        self, provider: StubProvider, make_embedder: Callable[..., OpenAIEmbedder]
    ) -> None:
        provider.mode = "reversed"
        texts = ["t0", "t1", "t2", "t3", "t4"]

        vectors = await make_embedder(batch_size=2).embed(texts)

        assert vectors == [fake_vector(t, DIM) for t in texts]


class TestQueryCache:
    async def test_a_repeated_query_asks_the_provider_once(
        self, provider: StubProvider, make_embedder: Callable[..., OpenAIEmbedder]
    ) -> None:
        emb = make_embedder()

        first = await emb.embed_query("favourite drink")
        second = await emb.embed_query("favourite drink")

        assert first == second == fake_vector("favourite drink", DIM)
        assert len(provider.requests) == 1

    async def test_a_failed_query_is_not_cached_and_recovers_with_the_provider(
        self, provider: StubProvider, make_embedder: Callable[..., OpenAIEmbedder]
    ) -> None:
        emb = make_embedder()
        provider.mode = "error"
        with pytest.raises(EmbeddingUnavailable):
            await emb.embed_query("favourite drink")

        provider.mode = "ok"

        assert await emb.embed_query("favourite drink") == fake_vector("favourite drink", DIM)
        assert len(provider.requests) == 2


class TestProviderFailures:
    @pytest.mark.parametrize("mode", ["error", "malformed", "wrong_dim", "short"])
    async def test_a_bad_answer_raises_embedding_unavailable(
        self, mode: str, provider: StubProvider, make_embedder: Callable[..., OpenAIEmbedder]
    ) -> None:
        provider.mode = mode

        with pytest.raises(EmbeddingUnavailable) as err:
            await make_embedder().embed(["one", "two"])

        assert err.value.code == "embedding_unavailable"
        assert err.value.status == 503

    async def test_a_bad_answer_to_a_query_raises_embedding_unavailable(
        self, provider: StubProvider, make_embedder: Callable[..., OpenAIEmbedder]
    ) -> None:
        provider.mode = "wrong_dim"

        with pytest.raises(EmbeddingUnavailable, match="384-d"):
            await make_embedder().embed_query("anything")

    async def test_a_wrong_api_key_raises_embedding_unavailable(
        self, provider: StubProvider, make_embedder: Callable[..., OpenAIEmbedder]
    ) -> None:
        with pytest.raises(EmbeddingUnavailable) as err:
            await make_embedder(api_key="sk-wrong").embed(["one"])

        assert err.value.code == "embedding_unavailable"
        assert provider.requests[0].authorization == "Bearer sk-wrong"

    async def test_a_slow_provider_times_out_as_embedding_unavailable(
        self, provider: StubProvider, make_embedder: Callable[..., OpenAIEmbedder]
    ) -> None:
        provider.mode = "slow"
        started = time.perf_counter()

        with pytest.raises(EmbeddingUnavailable) as err:
            await make_embedder(timeout_s=0.3).embed(["one"])

        assert err.value.code == "embedding_unavailable"
        assert time.perf_counter() - started < provider.delay_s

    async def test_an_unreachable_provider_raises_embedding_unavailable(
        self, make_embedder: Callable[..., OpenAIEmbedder]
    ) -> None:
        # Port 9 (discard) on loopback: nothing listens, the connection is refused.
        with pytest.raises(EmbeddingUnavailable):
            await make_embedder(base_url="http://127.0.0.1:9/v1").embed(["one"])


# ---- the whole app with a provider that always fails ---------------------------------------------


@pytest.fixture
async def failing_app(settings: Settings, pg_urls: DatabaseUrls, provider: StubProvider) -> AsyncIterator[Any]:
    provider.mode = "error"
    emb = OpenAIEmbedder(MODEL, base_url=provider.base_url, api_key=API_KEY, dim=DIM)
    application = create_app(settings, urls=pg_urls, embedder=emb)
    async with running(application):
        yield application
    await emb.aclose()


@pytest.fixture
async def failing_client(failing_app: Any) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=failing_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test") as c:
        yield c


MEMORIES = [
    "Ana prefers window seats on long flights",
    "The user prefers dark roast coffee",
    "The staging deploy runs every Friday afternoon",
]


async def store_memories(client: httpx.AsyncClient, tenant: Tenant) -> None:
    for content in MEMORIES:
        r = await client.post(
            f"/v1/namespaces/{tenant.namespace}/memories", json={"content": content}, headers=tenant.headers
        )
        assert r.status_code == 201, r.text


@pytest.mark.slow  # an app of its own per test, with a failing provider
class TestSearchWithoutEmbeddings:
    async def test_results_still_come_back_by_words(
        self, client: httpx.AsyncClient, failing_client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        await store_memories(client, tenant_a)

        r = await failing_client.post(
            f"/v1/namespaces/{tenant_a.namespace}/search", json={"query": "window seats"}, headers=tenant_a.headers
        )

        assert r.status_code == 200, r.text
        body = r.json()
        assert [hit["memory"]["content"] for hit in body["results"]] == [MEMORIES[0]]
        [hit] = body["results"]
        assert hit["score"] == 1.0  # ranked first by the only channel that ran
        assert hit["semantic_relevance"] is None  # no query vector, so no cosine to report
        assert hit["signals"]["dense_rank"] is None
        assert hit["signals"]["lexical_rank"] == 1
        assert body["metrics"]["backend_failures"] == ["embedding"]
        assert body["metrics"]["matched_by"] == {"dense": 0, "lexical": 1}

    async def test_min_score_is_not_applied_without_a_query_vector(
        self, client: httpx.AsyncClient, failing_client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        await store_memories(client, tenant_a)

        r = await failing_client.post(
            f"/v1/namespaces/{tenant_a.namespace}/search",
            json={"query": "Friday deploy", "min_score": 0.99},
            headers=tenant_a.headers,
        )

        assert r.status_code == 200, r.text
        body = r.json()
        assert [hit["memory"]["content"] for hit in body["results"]] == [MEMORIES[2]]
        assert body["metrics"]["min_score_applied"] is False

    async def test_the_same_min_score_is_applied_when_embeddings_work(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        await store_memories(client, tenant_a)

        r = await client.post(
            f"/v1/namespaces/{tenant_a.namespace}/search",
            json={"query": "Friday deploy", "min_score": 0.99},
            headers=tenant_a.headers,
        )

        assert r.status_code == 200, r.text
        assert r.json()["results"] == []
        assert r.json()["metrics"]["min_score_applied"] is True
        assert r.json()["metrics"]["backend_failures"] == []

    async def test_a_query_sharing_no_word_finds_nothing(
        self, client: httpx.AsyncClient, failing_client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        await store_memories(client, tenant_a)

        r = await failing_client.post(
            f"/v1/namespaces/{tenant_a.namespace}/search",
            json={"query": "favourite hot drink"},
            headers=tenant_a.headers,
        )

        assert r.status_code == 200, r.text
        assert r.json()["results"] == []
        assert r.json()["metrics"]["backend_failures"] == ["embedding"]

    async def test_a_missing_namespace_is_a_404_while_the_embedding_fails_beside_it(
        self, failing_client: httpx.AsyncClient, tenant_a: Tenant, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The query is embedded while the namespace is read: the missing namespace decides the
        answer, and the embedding left behind ends quietly."""
        r = await failing_client.post(
            "/v1/namespaces/no-such-namespace/search", json={"query": "window seats"}, headers=tenant_a.headers
        )
        await asyncio.sleep(0.2)  # time for the abandoned embedding to end

        assert r.status_code == 404, r.text
        assert r.json()["code"] == "namespace_not_found"
        assert "never retrieved" not in caplog.text

    async def test_other_tenant_sees_nothing(
        self, client: httpx.AsyncClient, failing_client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        await store_memories(client, tenant_a)

        r = await failing_client.post(
            f"/v1/namespaces/{tenant_b.namespace}/search", json={"query": "window seats"}, headers=tenant_b.headers
        )

        assert r.status_code == 200, r.text
        assert r.json()["results"] == []


@pytest.mark.slow  # an app of its own per test, with a failing provider
class TestWritesWithoutEmbeddings:
    async def _count(self, client: httpx.AsyncClient, tenant: Tenant) -> int:
        r = await client.get(f"/v1/namespaces/{tenant.namespace}/memories", headers=tenant.headers)
        assert r.status_code == 200, r.text
        return len(r.json()["data"])

    def _assert_unavailable(self, r: httpx.Response) -> None:
        assert r.status_code == 503, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        problem = r.json()
        assert problem["code"] == "embedding_unavailable"
        assert problem["status"] == 503
        assert problem["request_id"] == r.headers["x-request-id"]

    async def test_storing_a_memory_answers_503_and_stores_nothing(
        self, client: httpx.AsyncClient, failing_client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        r = await failing_client.post(
            f"/v1/namespaces/{tenant_a.namespace}/memories",
            json={"content": "Ana prefers aisle seats now"},
            headers=tenant_a.headers,
        )

        self._assert_unavailable(r)
        assert await self._count(client, tenant_a) == 0

    async def test_a_batch_answers_503_and_stores_nothing(
        self, client: httpx.AsyncClient, failing_client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        r = await failing_client.post(
            f"/v1/namespaces/{tenant_a.namespace}/memories/batch",
            json={"memories": [{"content": "first"}, {"content": "second"}]},
            headers=tenant_a.headers,
        )

        self._assert_unavailable(r)
        assert await self._count(client, tenant_a) == 0

    async def test_changing_content_answers_503_and_keeps_the_old_content(
        self, client: httpx.AsyncClient, failing_client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        r = await client.post(
            f"/v1/namespaces/{tenant_a.namespace}/memories", json={"content": MEMORIES[0]}, headers=tenant_a.headers
        )
        memory_id = r.json()["id"]

        r = await failing_client.patch(
            f"/v1/namespaces/{tenant_a.namespace}/memories/{memory_id}",
            json={"content": "Ana prefers aisle seats now"},
            headers=tenant_a.headers,
        )

        self._assert_unavailable(r)
        r = await client.get(f"/v1/namespaces/{tenant_a.namespace}/memories/{memory_id}", headers=tenant_a.headers)
        assert r.json()["content"] == MEMORIES[0]


class TestMetering:
    async def test_the_providers_token_count_is_metered_and_a_cached_query_costs_none(
        self, provider: StubProvider, make_embedder: Callable[..., OpenAIEmbedder]
    ) -> None:
        embedder = make_embedder(batch_size=2)
        with tallying(Tally()) as tally:
            await embedder.embed(["t0", "t1", "t2", "t3", "t4"])
        assert tally.tokens_embedded == 5  # the provider's usage.total_tokens, summed over three requests
        with tallying(Tally()) as tally:
            await embedder.embed_query("q")
            await embedder.embed_query("q")
        assert tally.tokens_embedded == 1
