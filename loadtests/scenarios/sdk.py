"""The Python SDK door: the real ``memvault_sdk.MemVault`` client inside a locust User. The SDK
has no locust hooks, so each call is timed here and reported with ``events.request.fire`` as
``SDK <operation>``; an SDK exception (an error status, a timeout) is the request's failure.
Retries are off so that a refusal shows up as one instead of being hidden by a retry."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from locust import User, task

from scenarios.config import identity, tour
from scenarios.rest import TYPES, wait
from scenarios.texts import Queries


class SdkAgent(User):
    """Application code using the SDK: search, context, store, a batch of 10, get, list, ingest."""

    wait_time = wait

    def on_start(self) -> None:
        from memvault_sdk import MemVault

        self.who = identity()
        self.rng = random.Random()
        self.queries = Queries(self.rng)
        self.ids: list[str] = []
        self.sdk = MemVault(
            api_key=self.who.tenant.key, base_url=self.host, namespace=self.who.namespace, timeout=60, max_retries=0
        )
        tour(self)

    def on_stop(self) -> None:
        self.sdk.close()

    def _timed(self, op: str, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        result, error = None, None
        try:
            result = fn()
        except Exception as exc:  # reported to locust as this request's failure
            error = exc
        self.environment.events.request.fire(
            request_type="SDK",
            name=f"SDK {op}",
            response_time=(time.perf_counter() - start) * 1000,
            response_length=0,
            exception=error,
            context={},
        )
        return result

    def _memory(self) -> dict[str, Any]:
        turn = self.queries.sentence()
        return {
            "content": f"{turn.speaker}: {turn.text}",
            "type": self.rng.choice(TYPES),
            "user_id": self.who.user_id,
            "session_id": self.who.session_id,
        }

    @task(30)
    def search(self) -> None:
        self._timed("search", lambda: self.sdk.search(self.queries.new(), limit=10))

    @task(15)
    def recall_context(self) -> None:
        self._timed("context", lambda: self.sdk.context(self.queries.new(), user_id=self.who.user_id))

    @task(15)
    def store(self) -> None:
        m = self._timed("store", lambda: self.sdk.memories.create(**self._memory()))
        if m is not None:
            self.ids.append(m.id)

    @task(5)
    def batch(self) -> None:
        made = self._timed("batch10", lambda: self.sdk.memories.create_many([self._memory() for _ in range(10)]))
        self.ids.extend(m.id for m in made or [])

    @task(10)
    def get(self) -> None:
        if not self.ids:
            page = self._timed("list", lambda: self.sdk.memories.list(user_id=self.who.user_id, limit=20))
            self.ids.extend(m.id for m in (page.data if page else []))
        if self.ids:
            self._timed("get", lambda: self.sdk.memories.get(self.rng.choice(self.ids)))

    @task(10)
    def list_memories(self) -> None:
        self._timed("list", lambda: self.sdk.memories.list(user_id=self.who.user_id, limit=20).data)

    @task(5)
    def events(self) -> None:
        turns = [self.queries.sentence() for _ in range(3)]
        messages = [{"role": "user", "content": t.text, "speaker": t.speaker} for t in turns]
        self._timed(
            "events",
            lambda: self.sdk.events.ingest(messages, session_id=self.who.session_id, user_id=self.who.user_id),
        )
