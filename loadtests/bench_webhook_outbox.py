"""What the webhook outbox adds to a memory write: `store` through the facade for a tenant with
no endpoint and one with one subscribed endpoint, interleaved in alternating blocks of one run,
and a third arm with the outbox call taken out (what a write cost before webhooks).

    HF_HUB_OFFLINE=1 PYTHONPATH=services .venv/bin/python loadtests/bench_webhook_outbox.py \\
        [--redis redis://127.0.0.1:6379/0] [--calls 1000] [--block 50]

The embedder returns a fixed vector (the model runs before the write's transaction opens, and
its milliseconds would only hide the outbox's), so what is timed is the write path: the room
check, the transaction, the insert, history, audit and, with webhooks, the outbox statement.
Prints p50/p95 per arm and the differences of the p50s.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Hashable, Sequence
from typing import Any

from harness import embedded_app, pct


class FixedEmbedder:
    """The model's dimension and id, a constant vector: no model time in the figures."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.dim = inner.dim
        self.model_id = inner.model_id

    async def embed(self, texts: Sequence[str], *, tenant: Hashable | None = None) -> list[list[float]]:
        return [[1.0 / self.dim**0.5] * self.dim for _ in texts]

    async def embed_query(self, text: str) -> list[float]:
        return [1.0 / self.dim**0.5] * self.dim

    async def aclose(self) -> None:
        return None


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--calls", type=int, default=1000, help="stores per arm")
    parser.add_argument("--block", type=int, default=50, help="stores in a row before switching arms")
    args = parser.parse_args()

    from memvault.memories.schemas import MemoryIn
    from memvault.principal import Principal
    from memvault.webhooks import outbox
    from memvault.webhooks.schemas import WebhookIn

    async with embedded_app("memvault-bench-outbox-", redis_url=args.redis, wrap_embedder=FixedEmbedder) as stack:
        api = stack.api
        bare, hooked = await api.create_tenant("bench-outbox-0"), await api.create_tenant("bench-outbox-1")
        admin = Principal.system(hooked.id, subject="bench")
        await api.create_webhook(admin, WebhookIn(url="https://hooks.example.com/in", events=["memory.created"]))
        real_emit = outbox.emit_many

        async def no_emit(*_: Any, **__: Any) -> int:
            return 0

        arms = {"off": bare, "0 endpoints": bare, "1 endpoint": hooked}
        times: dict[str, list[float]] = {arm: [] for arm in arms}
        seq = 0

        async def store(n: int, arm: str) -> None:
            nonlocal seq
            tenant = arms[arm]
            # The module attribute the memory service calls: out for the "off" arm only.
            outbox.emit_many = no_emit if arm == "off" else real_emit  # type: ignore[assignment]
            p = Principal.system(tenant.id, subject="bench")
            for _ in range(n):
                seq += 1
                body = MemoryIn(content=f"Note {seq}: the garden project met about topic {seq % 17}.")
                started = time.perf_counter()
                await api.store(p, tenant.namespace, body)
                times[arm].append((time.perf_counter() - started) * 1000)

        for arm in arms:  # warm-up, not counted
            await store(100, arm)
        times = {arm: [] for arm in arms}
        order = list(arms)
        for i in range(0, args.calls, args.block):
            for arm in order if (i // args.block) % 2 == 0 else order[::-1]:
                await store(min(args.block, args.calls - i), arm)
        outbox.emit_many = real_emit  # type: ignore[assignment]
    print(f"{args.calls} stores per arm, blocks of {args.block}, interleaved; fixed-vector embedder\n")
    print("| arm | p50 ms | p95 ms |")
    print("|---|---|---|")
    for arm, values in times.items():
        print(f"| {arm} | {pct(values, 50):.3f} | {pct(values, 95):.3f} |")
    off = pct(times["off"], 50)
    print(f"\nadded p50, 0 endpoints vs off: {pct(times['0 endpoints'], 50) - off:+.3f} ms")
    print(f"added p50, 1 endpoint vs off: {pct(times['1 endpoint'], 50) - off:+.3f} ms")
    print(f"added p50, 1 endpoint vs 0: {pct(times['1 endpoint'], 50) - pct(times['0 endpoints'], 50):+.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
