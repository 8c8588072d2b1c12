"""Single texts on ONNX Runtime batched while the session is busy, with the real MiniLM model.

The session is wrapped to count its runs and, where a test needs the model busy, to hold a run
until the test lets it go: what is batched is decided by who is waiting, never by a clock."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from memvault.embeddings.local import LocalEmbedder

LONG = "The quarterly tax report is due next Tuesday and the accountant wants the receipts. " * 40
MIXED = [
    "x",
    "Ana prefers window seats",
    "What did Caroline research last year about adoption agencies?",
    "Deploys happen on Fridays after the staging database on port 5433 has been checked " * 3,
    LONG,  # truncated to the model's 256 tokens
]


class CountingSession:
    """The real ONNX session, counting runs and the texts in each; ``hold`` makes the next run
    wait for ``release``, and ``fail_next`` makes the next run raise instead."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self.batches: list[int] = []
        self.running = threading.Event()
        self._gate: threading.Event | None = None  # for the next run
        self._held = threading.Event()
        self._fail_next = False

    def hold(self) -> None:
        self.running.clear()
        self._gate = self._held = threading.Event()

    def release(self) -> None:
        self._held.set()

    def fail_next(self) -> None:
        self._fail_next = True

    def run(self, names: Any, feeds: dict[str, np.ndarray]) -> Any:
        self.batches.append(int(feeds["input_ids"].shape[0]))
        fail, self._fail_next = self._fail_next, False
        gate, self._gate = self._gate, None
        if gate is not None:
            self.running.set()
            gate.wait(timeout=60)
        if fail:
            raise RuntimeError("the session failed")
        return self._session.run(names, feeds)


@pytest.fixture
def fresh(embedder: LocalEmbedder) -> LocalEmbedder:
    """The loaded model with no query cache, so every call reaches the session."""
    emb = LocalEmbedder(embedder.model_id, dim=embedder.dim, cache_size=0)
    emb._model, emb._single, emb._query_input = embedder._model, embedder._single, embedder._query_input
    return emb


@pytest.fixture
def session(fresh: LocalEmbedder) -> Iterator[CountingSession]:
    counting = CountingSession(fresh._single)
    fresh._single = counting
    yield counting
    counting.release()  # a failed test must not leave a worker thread waiting


async def alone(embedder: LocalEmbedder, texts: list[str]) -> list[list[float]]:
    return [(await embedder.embed([t]))[0] for t in texts]


async def busy(fresh: LocalEmbedder, session: CountingSession, text: str) -> asyncio.Task[list[float]]:
    """A call whose run holds the session until ``session.release()``."""
    session.hold()
    task = asyncio.create_task(fresh.embed_query(text))
    await asyncio.to_thread(session.running.wait, 60)
    return task


async def queued(fresh: LocalEmbedder, n: int) -> None:
    """Let the tasks just made start: each is waiting for the session by its first await."""
    await asyncio.sleep(0)
    assert fresh._queries.waiting == n


class TestSameVectors:
    async def test_a_text_in_a_mixed_length_batch_gets_its_vector_alone(self, fresh: LocalEmbedder) -> None:
        one_by_one = await alone(fresh, MIXED)

        together = fresh._encode_queries(MIXED)  # one run, padded to LONG's 256 tokens

        for single, batched in zip(one_by_one, together, strict=True):
            assert np.abs(np.asarray(single) - np.asarray(batched)).max() < 1e-5

    async def test_a_query_vector_does_not_depend_on_the_rest_of_its_batch(self, fresh: LocalEmbedder) -> None:
        query = "What did Caroline research last year about adoption agencies?"
        neighbours = [["x"], [LONG], ["Ana prefers window seats", LONG, "y " * 40]]

        vectors = [fresh._encode_queries([*others, query])[-1] for others in neighbours]

        for vector in vectors[1:]:
            assert np.abs(np.asarray(vector) - np.asarray(vectors[0])).max() < 1e-5

    async def test_concurrent_queries_of_different_lengths_get_their_own_vectors(
        self, fresh: LocalEmbedder, session: CountingSession
    ) -> None:
        texts = [f"{i}: {MIXED[i % len(MIXED)]}" for i in range(20)]
        expected = await alone(fresh, texts)
        session.batches.clear()

        results = await asyncio.gather(*(fresh.embed_query(t) for t in texts))

        assert np.abs(np.asarray(results) - np.asarray(expected)).max() < 1e-5
        assert sum(session.batches) == len(texts)


class TestBatching:
    async def test_a_burst_is_served_by_fewer_runs_than_calls(
        self, fresh: LocalEmbedder, session: CountingSession
    ) -> None:
        texts = [f"what did user {i} say about project {i * 7} last week?" for i in range(16)]

        await asyncio.gather(*(fresh.embed_query(t) for t in texts))

        assert sum(session.batches) == len(texts)
        assert len(session.batches) < len(texts)

    async def test_texts_that_wait_for_a_run_go_together_in_the_next(
        self, fresh: LocalEmbedder, session: CountingSession
    ) -> None:
        texts = [f"who adopted the greyhound named Biscuit in {1990 + i}?" for i in range(6)]
        expected = await alone(fresh, texts)
        session.batches.clear()

        first = await busy(fresh, session, texts[0])
        rest = [asyncio.create_task(fresh.embed_query(t)) for t in texts[1:]]
        await queued(fresh, len(rest))
        session.release()
        results = await asyncio.gather(first, *rest)

        assert session.batches == [1, len(rest)]
        assert np.abs(np.asarray(results) - np.asarray(expected)).max() < 1e-5

    async def test_a_lone_query_runs_alone(self, fresh: LocalEmbedder, session: CountingSession) -> None:
        await fresh.embed_query("one query and nothing else")

        assert session.batches == [1]

    async def test_a_long_text_does_not_join_a_batch_of_short_ones(
        self, fresh: LocalEmbedder, session: CountingSession
    ) -> None:
        first = await busy(fresh, session, "hold the session")
        short = [asyncio.create_task(fresh.embed_query(f"short query {i}")) for i in range(4)]
        long = asyncio.create_task(fresh.embed_query(LONG))
        await queued(fresh, 5)
        session.release()
        await asyncio.gather(first, *short, long)

        assert session.batches == [1, 4, 1]


class TestFailures:
    async def test_a_cancelled_waiter_leaves_the_others_their_vectors(
        self, fresh: LocalEmbedder, session: CountingSession
    ) -> None:
        texts = ["Ana prefers window seats", "The build uses Python 3.11", "Deploys happen on Fridays"]
        expected = await alone(fresh, texts)
        session.batches.clear()

        first = await busy(fresh, session, texts[0])
        gone = asyncio.create_task(fresh.embed_query("a client that went away"))
        second, third = (asyncio.create_task(fresh.embed_query(t)) for t in texts[1:])
        await queued(fresh, 3)
        gone.cancel()
        session.release()
        results = await asyncio.gather(first, second, third)

        assert gone.cancelled()
        assert session.batches == [1, 2]  # the cancelled text was left out
        assert np.abs(np.asarray(results) - np.asarray(expected)).max() < 1e-5

    async def test_a_caller_cancelled_during_its_run_does_not_break_the_batch(
        self, fresh: LocalEmbedder, session: CountingSession
    ) -> None:
        texts = ["Ana prefers window seats", "The build uses Python 3.11"]
        expected = await alone(fresh, texts)
        session.batches.clear()

        gone = await busy(fresh, session, "a client that went away mid-run")
        waiting = [asyncio.create_task(fresh.embed_query(t)) for t in texts]
        await queued(fresh, 2)
        gone.cancel()
        session.release()
        results = await asyncio.gather(*waiting)

        assert gone.cancelled()
        assert session.batches == [1, 2]
        assert np.abs(np.asarray(results) - np.asarray(expected)).max() < 1e-5

    async def test_an_error_reaches_every_caller_of_the_batch_and_the_next_call_works(
        self, fresh: LocalEmbedder, session: CountingSession
    ) -> None:
        expected = (await alone(fresh, ["after the failure"]))[0]
        first = await busy(fresh, session, "runs before the failure")
        failing = [asyncio.create_task(fresh.embed_query(f"in the failing batch {i}")) for i in range(3)]
        await queued(fresh, 3)
        session.fail_next()
        session.release()
        outcomes = await asyncio.gather(first, *failing, return_exceptions=True)

        assert isinstance(outcomes[0], list)
        assert all(isinstance(o, RuntimeError) and str(o) == "the session failed" for o in outcomes[1:])
        assert np.abs(np.asarray(await fresh.embed_query("after the failure")) - expected).max() < 1e-5
