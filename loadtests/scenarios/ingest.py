"""Ingestion: an agent sends a conversation to ``POST .../events`` and waits until what it said can
be recalled. The custom metric ``INGEST events to searchable`` is that wait, from the POST to the
first search that returns the extracted memory (polled every ``POLL_S``; a failure after
``GIVE_UP_S``). Each message names a made-up word, so that exactly its memory answers the search."""

from __future__ import annotations

import random
import string
import time

from locust import FastHttpUser, task

from scenarios.config import identity, tour
from scenarios.rest import RestOps, wait

POLL_S = 0.25
GIVE_UP_S = 60.0
FOODS = ["pastries", "dumplings", "noodles", "pancakes", "tacos", "curries"]


class IngestAgent(FastHttpUser):
    wait_time = wait

    def on_start(self) -> None:
        self.ops = RestOps(self.client, identity(), label="INGEST")
        self.rng = random.Random()
        tour(self)

    @task
    def ingest_then_recall(self) -> None:
        word = "zq" + "".join(self.rng.choices(string.ascii_lowercase, k=8))
        messages = [
            {"role": "user", "content": f"I really love {word} {self.rng.choice(FOODS)} from the corner bakery."},
            {"role": "assistant", "content": "Noted, I will remember that."},
        ]
        who = self.ops.who
        body = {"session_id": who.session_id, "user_id": who.user_id, "messages": messages}
        start = time.perf_counter()
        if self.ops.send("POST", f"{self.ops.base}/events", "events", body, ok=(202,)) is None:
            return
        error: Exception | None = None
        while True:
            found = self.ops.send("POST", f"{self.ops.base}/search", "poll search", {"query": word, "limit": 10})
            if found and any(word in r["memory"]["content"] for r in found["results"]):
                break
            if time.perf_counter() - start > GIVE_UP_S:
                error = TimeoutError(f"not searchable after {GIVE_UP_S:.0f} s")
                break
            time.sleep(POLL_S)
        self.environment.events.request.fire(
            request_type="INGEST",
            name="INGEST events to searchable",
            response_time=(time.perf_counter() - start) * 1000,
            response_length=0,
            exception=error,
            context={},
        )
        who.new_session()
