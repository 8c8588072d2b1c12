"""Single texts that arrive while the model is busy run together, as one batch, when it is free.

Every search query, every context with a query and every single store embeds one text. One text
at a time, the ONNX session spends most of each run on fixed costs (32 ms a query here; 16 at once
take about 9 ms each), so under load the queries queued behind one lock one run each and the
embedding stage became the service's queue (issue 25). Here a text that arrives while a run is
under way waits; when the run ends, the waiting texts run as one batch. Nothing waits on a timer:
a text that finds the model idle runs at once, alone.

A batch is bounded in texts and in padded tokens (every text is padded to the batch's longest),
and is made of texts of about the same length, the oldest waiting text first: a 256-token memory
costs as much as about twenty short queries, and must not make a batch of them slow. Padding does
not change a vector (the pooling counts real tokens only; tests/embeddings compares each text in a
mixed batch with the text alone).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

# Characters per word piece in English text, to estimate a text's tokens without tokenizing it on
# the event loop (the tokenizer runs on the worker thread, with the batch).
_CHARS_PER_TOKEN = 4

# What a run gives for each text: its vector, or the vector with what else the run learnt of it.
Out = TypeVar("Out")


@dataclass
class _Waiting(Generic[Out]):
    text: str
    tokens: int
    future: asyncio.Future[Out] = field(repr=False)


class MicroBatcher(Generic[Out]):
    """Runs ``run(texts) -> one result per text`` on a worker thread, one batch at a time, for
    single texts."""

    def __init__(
        self,
        run: Callable[[list[str]], list[Out]],
        *,
        max_texts: int = 16,
        max_tokens: int = 512,
        max_seq_length: int = 256,
    ) -> None:
        self._run = run
        self._max_texts = max(1, max_texts)
        self._max_tokens = max_tokens
        self._max_seq = max_seq_length
        self._waiting: list[_Waiting[Out]] = []
        # The task running batches while any text waits; None when the model is idle.
        self._driver: asyncio.Task[None] | None = None

    @property
    def waiting(self) -> int:
        """Texts waiting for a batch, not counting the one running (for tests and metrics)."""
        return sum(not w.future.done() for w in self._waiting)

    async def embed(self, text: str) -> Out:
        loop = asyncio.get_running_loop()
        if self._driver is not None and self._driver.get_loop() is not loop:
            # Left by an event loop that has ended (the tests run one per test): its waiters are gone.
            self._driver, self._waiting = None, []
        future: asyncio.Future[Out] = loop.create_future()
        tokens = min(self._max_seq, math.ceil(len(text) / _CHARS_PER_TOKEN) + 2)
        self._waiting.append(_Waiting(text, tokens, future))
        if self._driver is None:
            self._driver = loop.create_task(self._drive())
        # A caller that is cancelled leaves its future cancelled: a waiting text is then left out
        # of the next batch, a running one's vector is dropped; the batch goes on for the others.
        return await future

    async def _drive(self) -> None:
        batch: list[_Waiting[Out]] = []
        try:
            while batch := self._next_batch():
                try:
                    vectors = await asyncio.to_thread(self._run, [w.text for w in batch])
                except Exception as exc:  # every caller of the batch gets it; the next batch runs
                    for w in batch:
                        if not w.future.done():
                            w.future.set_exception(exc)
                else:
                    for w, vector in zip(batch, vectors, strict=True):
                        if not w.future.done():
                            w.future.set_result(vector)
        finally:
            # Normally no one is left; if the loop is tearing this task down, no caller hangs.
            for w in [*batch, *self._waiting]:
                if not w.future.done():
                    w.future.cancel()
            self._waiting, self._driver = [], None

    def _next_batch(self) -> list[_Waiting[Out]]:
        """The oldest waiting text and those nearest its length, within the bounds; taken off the
        queue."""
        waiting = [w for w in self._waiting if not w.future.done()]
        if not waiting:
            self._waiting = []
            return []
        first = waiting[0]
        batch, longest = [first], first.tokens
        for w in sorted(waiting[1:], key=lambda w: abs(w.tokens - first.tokens)):
            if len(batch) == self._max_texts:
                break
            wider = max(longest, w.tokens)
            if wider * (len(batch) + 1) <= self._max_tokens:
                batch.append(w)
                longest = wider
        taken = {id(w) for w in batch}
        self._waiting = [w for w in waiting if id(w) not in taken]
        return batch
