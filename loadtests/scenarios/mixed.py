"""The mixed load of issue 25, the one the capacity figures are quoted for: search with new queries
50 %, context 15 %, store 15 %, a batch of 10 5 %, get 5 %, list 5 %, MCP memory_search 5 %."""

from __future__ import annotations

from locust import FastHttpUser, task

from scenarios.config import identity, tour
from scenarios.mcp import McpOps
from scenarios.rest import RestOps, wait


class MixedAgent(FastHttpUser):
    wait_time = wait

    def on_start(self) -> None:
        who = identity()
        self.via_rest = RestOps(self.client, who)
        self.via_mcp = McpOps(self.client, who)
        tour(self)

    @task(50)
    def search(self) -> None:
        self.via_rest.search()

    @task(15)
    def recall_context(self) -> None:
        self.via_rest.context()

    @task(15)
    def store(self) -> None:
        self.via_rest.store()

    @task(5)
    def batch(self) -> None:
        self.via_rest.batch()

    @task(5)
    def get(self) -> None:
        self.via_rest.get()

    @task(5)
    def list_memories(self) -> None:
        self.via_rest.list()

    @task(5)
    def mcp_search(self) -> None:
        self.via_mcp.search()
