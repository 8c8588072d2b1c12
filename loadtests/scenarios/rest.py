"""The REST door as agents use it: search with new queries, context, store, a batch of 10, get,
list and events, each under the name ``REST <operation>`` in locust's statistics."""

from __future__ import annotations

import random
from collections import defaultdict, deque
from typing import Any

import gevent
from locust import FastHttpUser, task
from locust.contrib.fasthttp import FastHttpSession

from scenarios.config import Identity, backoff_s, identity, think_s, tour
from scenarios.texts import Queries

TYPES = ["fact", "preference", "event", "decision", "note"]
# The server's own timings of each REST search (``metrics.timings_ms``: embed, sql, ..., total), by
# stage, so that a run shows where a search's time goes inside the server as well as around it.
SEARCH_STAGES: dict[str, list[float]] = defaultdict(list)


class RestOps:
    """One agent's REST calls; ``label`` prefixes every statistics name (``REST``, ``quiet REST``)."""

    def __init__(self, client: FastHttpSession, who: Identity, label: str = "REST") -> None:
        self.client = client
        self.who = who
        self.label = label
        self.rng = random.Random()
        self.queries = Queries(self.rng)
        self.ids: deque[str] = deque(maxlen=200)

    @property
    def base(self) -> str:
        return f"/v1/namespaces/{self.who.namespace}"

    def send(self, method: str, path: str, op: str, body: Any = None, ok: tuple[int, ...] = (200,)) -> Any:
        pause = 0.0
        with self.client.request(
            method, path, json=body, headers=self.who.headers, name=f"{self.label} {op}", catch_response=True
        ) as r:
            if r.status_code not in ok:
                r.failure(f"{r.status_code}: {(r.text or '')[:200]}")
                pause = backoff_s(r.status_code, r.headers)
            else:
                try:
                    return r.json() if r.text else None
                except ValueError:
                    r.failure("not JSON")
                    return None
        gevent.sleep(pause)  # outside the request: the wait is not its response time
        return None

    def memory(self) -> dict[str, Any]:
        turn = self.queries.sentence()
        return {
            "content": f"{turn.speaker}: {turn.text}",
            "type": self.rng.choice(TYPES),
            "user_id": self.who.user_id,
            "session_id": self.who.session_id,
            "metadata": {"source": "loadtest"},
        }

    def search(self) -> Any:
        out = self.send("POST", f"{self.base}/search", "search", {"query": self.queries.new(), "limit": 10})
        for stage, ms in ((out or {}).get("metrics") or {}).get("timings_ms", {}).items():
            SEARCH_STAGES[stage].append(float(ms))
        return out

    def context(self) -> Any:
        body = {"query": self.queries.new(), "user_id": self.who.user_id, "token_budget": 1500}
        return self.send("POST", f"{self.base}/context", "context", body)

    def store(self) -> None:
        out = self.send("POST", f"{self.base}/memories", "store", self.memory(), ok=(201,))
        if out:
            self.ids.append(out["id"])

    def batch(self, n: int = 10, op: str = "batch10") -> None:
        out = self.send(
            "POST", f"{self.base}/memories/batch", op, {"memories": [self.memory() for _ in range(n)]}, ok=(201,)
        )
        if out:
            self.ids.extend(m["id"] for m in out["memories"])

    def list(self) -> None:
        out = self.send("GET", f"{self.base}/memories?limit=20&user_id={self.who.user_id}", "list")
        if out:
            self.ids.extend(m["id"] for m in out["data"])

    def get(self) -> None:
        if not self.ids:
            self.list()
        if self.ids:
            self.send("GET", f"{self.base}/memories/{self.rng.choice(self.ids)}", "get")

    def events(self) -> Any:
        turns = [self.queries.sentence() for _ in range(self.rng.randint(2, 4))]
        messages = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": t.text, "speaker": t.speaker}
            for i, t in enumerate(turns)
        ]
        body = {"session_id": self.who.session_id, "user_id": self.who.user_id, "messages": messages}
        return self.send("POST", f"{self.base}/events", "events", body, ok=(202,))


def wait(user: Any) -> float:
    return random.uniform(0, think_s())


class RestAgent(FastHttpUser):
    """An agent on the REST door: recall first, write what it learns, sometimes a whole exchange."""

    wait_time = wait

    def on_start(self) -> None:
        self.ops = RestOps(self.client, identity())
        tour(self)

    @task(30)
    def search(self) -> None:
        self.ops.search()

    @task(15)
    def recall_context(self) -> None:
        self.ops.context()

    @task(15)
    def store(self) -> None:
        self.ops.store()

    @task(5)
    def batch(self) -> None:
        self.ops.batch()

    @task(10)
    def get(self) -> None:
        self.ops.get()

    @task(10)
    def list_memories(self) -> None:
        self.ops.list()

    @task(5)
    def events(self) -> None:
        self.ops.events()
        if self.ops.rng.random() < 0.2:  # a new conversation now and then
            self.ops.who.new_session()
