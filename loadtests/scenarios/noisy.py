"""Noisy neighbour: one tenant floods (batches of 50 memories and searches, no pause) while the
other tenants work as usual; their operations are named ``quiet REST ...`` so that their latency
is read apart from the flood's (``noisy REST ...``). Run ``QuietTenant`` alone for the baseline."""

from __future__ import annotations

import random

from locust import FastHttpUser, constant, task

from scenarios.config import identity, noisy_and_quiet, tour
from scenarios.rest import RestOps, wait


class NoisyNeighbour(FastHttpUser):
    wait_time = constant(0)

    def on_start(self) -> None:
        noisy, _ = noisy_and_quiet()
        self.ops = RestOps(self.client, identity(noisy), label="noisy REST")
        tour(self)

    @task(3)
    def flood_searches(self) -> None:
        self.ops.search()

    @task(1)
    def flood_writes(self) -> None:
        self.ops.batch(50, op="batch50")


class QuietTenant(FastHttpUser):
    wait_time = wait

    def on_start(self) -> None:
        _, quiet = noisy_and_quiet()
        self.ops = RestOps(self.client, identity(quiet, random.Random()), label="quiet REST")
        tour(self)

    @task(6)
    def search(self) -> None:
        self.ops.search()

    @task(2)
    def recall_context(self) -> None:
        self.ops.context()

    @task(2)
    def store(self) -> None:
        self.ops.store()
