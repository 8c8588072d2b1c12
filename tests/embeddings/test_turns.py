"""Fair turns at the embedding model: a big batch yields between slices, tenants take turns, and the
vectors stay bit-for-bit those of sentence-transformers' own batching."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from memvault.embeddings.local import LocalEmbedder, resolve_model_path
from memvault.embeddings.turns import FairTurns

# 3,500 characters, as in the import that held the model for 58 s: truncated to the model's 256
# tokens, the most expensive text there is.
LONG = "Imported note about the quarterly shipment schedule and the warehouse in Lyon. " * 45


def mixed_texts(n: int) -> list[str]:
    """Lengths from one word to far past the model's window, repeating (ties in the length sort)."""
    return [f"note {i}: " + " ".join(["the user mentioned the budget for project alpha"] * (i % 13)) for i in range(n)]


async def finishing_order(calls: dict[str, asyncio.Future[object] | asyncio.Task[object]]) -> list[str]:
    order: list[str] = []
    for name, call in calls.items():
        call.add_done_callback(lambda _, name=name: order.append(name))
    await asyncio.gather(*calls.values())
    return order


class TestFairness:
    async def test_a_small_batch_from_another_tenant_finishes_before_the_big_one(self, embedder: LocalEmbedder) -> None:
        # Started first, the big batch holds the model when the small one arrives; the small one
        # gets the next turn instead of waiting for all 40 long texts.
        big = asyncio.create_task(embedder.embed([f"{i} {LONG}" for i in range(40)], tenant="a"))
        small = asyncio.create_task(embedder.embed(["Ana prefers window seats", "Deploys on Fridays"], tenant="b"))

        order = await finishing_order({"big": big, "small": small})

        assert order == ["small", "big"]
        assert len(big.result()) == 40 and len(small.result()) == 2

    async def test_calls_naming_no_tenant_take_turns_too(self, embedder: LocalEmbedder) -> None:
        big = asyncio.create_task(embedder.embed([f"{i} {LONG}" for i in range(40)]))
        small = asyncio.create_task(embedder.embed(["Ana prefers window seats", "Deploys on Fridays"]))

        assert await finishing_order({"big": big, "small": small}) == ["small", "big"]

    async def test_a_tenant_with_two_big_batches_does_not_get_two_turns_to_one(self, embedder: LocalEmbedder) -> None:
        """Turns go by tenant first: tenant A's two imports share A's turns, so tenant B's import
        of the same size (started last) finishes before A's second one."""
        texts = [f"{i} {LONG}" for i in range(16)]
        a1 = asyncio.create_task(embedder.embed(texts, tenant="a"))
        a2 = asyncio.create_task(embedder.embed(texts, tenant="a"))
        b = asyncio.create_task(embedder.embed(texts, tenant="b"))

        order = await finishing_order({"a1": a1, "a2": a2, "b": b})

        assert order == ["b", "a1", "a2"]
        assert a1.result() == a2.result() == b.result()


@pytest.mark.slow  # loads a second copy of the model and embeds long texts
class TestSameVectors:
    async def test_vectors_are_those_of_sentence_transformers_batches(self, embedder: LocalEmbedder) -> None:
        """Sliced into turns or not, each text gets the vector `encode(batch_size=64)` gives it
        (mixed lengths, so batches are padded, and long texts, so batches are sliced), to float32
        rounding: torch picks its matrix kernels by shape, so a slice of 5 rows and encode's batch
        of 64 may round the last bit differently (1.6e-7 for 4 of 108 rows with torch 2.13 and
        transformers 5.24; bit for bit with the versions before). A slicing or masking mistake
        would move a vector by orders of magnitude more."""
        texts = mixed_texts(100) + [f"{i} {LONG}" for i in range(8)]
        model = SentenceTransformer(resolve_model_path(embedder.model_id), device="cpu")

        ours = await embedder.embed(texts, tenant="a")
        theirs = model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)

        ours_array = np.asarray(ours, dtype=np.float32)
        assert np.abs(ours_array - theirs).max() <= 1e-6
        assert np.einsum("ij,ij->i", ours_array, theirs).min() >= 1 - 1e-6

    async def test_concurrent_calls_get_the_vectors_they_get_alone(self, embedder: LocalEmbedder) -> None:
        first, second = mixed_texts(70), [f"{i} {LONG}" for i in range(12)]
        alone = [await embedder.embed(first), await embedder.embed(second)]

        together = await asyncio.gather(embedder.embed(first, tenant="a"), embedder.embed(second, tenant="b"))

        assert list(together) == alone


class TestFairTurns:
    async def test_turns_go_round_robin_across_owners(self) -> None:
        turns = FairTurns()
        ran: list[str] = []
        holding = threading.Event()

        def first_slice() -> None:
            holding.wait(timeout=10)  # hold the model until every caller is waiting
            ran.append("a")

        async def caller(owner: str, slices: int) -> None:
            for _ in range(slices):
                await turns.run(owner, ran.append, owner)

        async def a() -> None:
            await turns.run("a", first_slice)
            await caller("a", 3)

        tasks = [asyncio.create_task(a()), asyncio.create_task(caller("b", 2)), asyncio.create_task(caller("c", 1))]
        for _ in range(3):
            await asyncio.sleep(0)  # each task runs to its first wait
        assert turns.waiting == 2
        holding.set()
        await asyncio.gather(*tasks)

        assert ran == ["a", "b", "c", "a", "b", "a", "a"]

    async def test_a_cancelled_waiter_gives_up_its_place(self) -> None:
        turns = FairTurns()
        release = threading.Event()
        holder = asyncio.create_task(turns.run("a", release.wait, 10))
        await asyncio.sleep(0.05)
        waiter = asyncio.create_task(turns.run("b", lambda: "b"))
        await asyncio.sleep(0.05)

        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        release.set()
        await holder

        assert turns.waiting == 0
        assert await asyncio.wait_for(turns.run("c", lambda: "c"), 5) == "c"

    async def test_a_cancelled_caller_keeps_the_turn_until_its_thread_ends(self) -> None:
        """The thread cannot be stopped: the next slice must not run beside it on the same model."""
        turns = FairTurns()
        release = threading.Event()
        running: list[str] = []

        def slow() -> None:
            running.append("slow started")
            release.wait(10)
            running.append("slow ended")

        holder = asyncio.create_task(turns.run("a", slow))
        await asyncio.sleep(0.05)
        holder.cancel()
        nxt = asyncio.create_task(turns.run("b", running.append, "next"))
        await asyncio.sleep(0.1)
        assert running == ["slow started"]

        release.set()
        await nxt

        assert running == ["slow started", "slow ended", "next"]

    async def test_an_error_in_a_slice_reaches_its_caller_and_frees_the_turn(self) -> None:
        turns = FairTurns()

        def fail() -> None:
            raise ValueError("model broke")

        with pytest.raises(ValueError, match="model broke"):
            await turns.run("a", fail)
        assert await asyncio.wait_for(turns.run("b", lambda: "ok"), 5) == "ok"
