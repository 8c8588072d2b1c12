"""Client-side cost of one SDK call: building the request, sending it through httpx and parsing the
answer, with no network and no server (httpx.MockTransport answers from memory). Measures what
the SDK itself adds to a call, so two versions of the SDK can be compared:

    PYTHONPATH=sdk .venv/bin/python loadtests/bench_sdk_call.py
    git archive <commit> sdk | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/sdk .venv/bin/python loadtests/bench_sdk_call.py

CPU time per call (process time, so a busy shared machine slows it less than wall time would),
the median of five rounds after a warm-up. Prints a markdown table.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

import httpx

from memvault_sdk import MemVault

MEMORY = {
    "id": "4f9e2a52-51c4-4b1e-9a36-6f0b7b3a2c10",
    "namespace": "default",
    "type": "fact",
    "content": "Ana prefers window seats",
    "scope": "namespace",
    "metadata": {"source": "chat"},
    "importance": 0.5,
    "confidence": 1.0,
    "state": "stable",
    "recorded_at": "2026-01-01T00:00:00Z",
    "source_event_ids": [],
    "content_hash": "3b1f",
    "created_by": "key",
    "created_at": "2026-01-01T00:00:00Z",
    "updated_at": "2026-01-01T00:00:00Z",
}
ONE = json.dumps(MEMORY).encode()
PAGE = json.dumps({"data": [MEMORY] * 50, "next_cursor": None}).encode()
JSON = {"content-type": "application/json"}


def answer(request: httpx.Request) -> httpx.Response:
    if request.method == "GET" and request.url.path.endswith("/memories"):
        return httpx.Response(200, content=PAGE, headers=JSON)
    return httpx.Response(201 if request.method == "POST" else 200, content=ONE, headers=JSON)


def cpu_us_per_call(call: Callable[[], object], n: int) -> float:
    for _ in range(n // 10):
        call()
    rounds = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(n):
            call()
        rounds.append((time.process_time() - start) / n * 1e6)
    return statistics.median(rounds)


def main() -> None:
    http = httpx.Client(transport=httpx.MockTransport(answer))
    with MemVault(api_key="mv_bench", base_url="http://memvault.bench", http_client=http) as client:
        calls: list[tuple[str, Callable[[], object], int]] = [
            ("memories.get", lambda: client.memories.get(MEMORY["id"]), 3000),
            ("memories.create", lambda: client.memories.create("Ana runs", user_id="ana"), 3000),
            ("memories.list, a page of 50", lambda: client.memories.list(), 500),
        ]
        print("| call | CPU µs per call |\n|---|---|")
        for name, call, n in calls:
            print(f"| {name} | {cpu_us_per_call(call, n):.0f} |")


if __name__ == "__main__":
    main()
