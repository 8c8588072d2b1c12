"""Fairness at the embedding model: tenant B stores a small batch while tenant A stores a big one.

Before issue 27 the big batch held the one embedding lock for its whole run (1,000 texts of 3.5 KB:
58 s) and B's two memories waited behind it. Now the model takes turns slice by slice across
tenants, so B's batch should take about what it takes alone. Through the facade (guard, embedding,
the PostgreSQL write and the in-process jobs after it) on the embedded PostgreSQL and the local
MiniLM model:

    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/bench_fairness.py [--big 300] [--slice-tokens 1024]

Also times the big batch's embedding alone, sliced into turns against sentence-transformers'
plain ``encode`` (what a lone caller ran before), so that fairness is seen not to cost a lone
caller. Prints a markdown table; compare the ratios, not the absolute times, on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from harness import embedded_app

# 3,500 characters, the size of the texts in the import that held the model for 58 s.
LONG = "Imported note about the quarterly shipment schedule and the warehouse in Lyon. " * 45


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--big", type=int, default=300, help="memories in tenant A's batch (3.5 KB each)")
    parser.add_argument("--small", type=int, default=2, help="memories in tenant B's batch")
    parser.add_argument("--rounds", type=int, default=7, help="small batches timed alone, and beside the big one")
    parser.add_argument("--slice-tokens", type=int, default=None, help="the embedder's slice (default: its own)")
    args = parser.parse_args()

    from memvault.memories.schemas import MemoryIn
    from memvault.namespaces.schemas import NamespaceIn
    from memvault.principal import Principal

    options = {} if args.slice_tokens is None else {"slice_tokens": args.slice_tokens}
    async with embedded_app("memvault-fair-bench-", embedder_options=options) as stack:
        api, embedder = stack.api, stack.embedder
        a = Principal.system((await api.create_tenant("fair-a")).id, subject="bench")
        b = Principal.system((await api.create_tenant("fair-b")).id, subject="bench")
        for p in (a, b):
            await api.create_namespace(p, NamespaceIn(name="n"))
        serial = iter(range(10**9))

        def small_batch() -> list[MemoryIn]:
            return [MemoryIn(content=f"Ana prefers window seats on flight {next(serial)}") for _ in range(args.small)]

        def big_batch() -> list[MemoryIn]:
            return [MemoryIn(content=f"{next(serial)} {LONG}") for _ in range(args.big)]

        async def timed_small() -> float:
            started = time.perf_counter()
            await api.store_many(b, "n", small_batch())
            return (time.perf_counter() - started) * 1000

        await timed_small()  # warm: connections, the first query plans
        alone = [await timed_small() for _ in range(args.rounds)]  # more after the big batches: drift evens out

        started = time.perf_counter()
        await api.store_many(a, "n", big_batch())
        big_alone_s = time.perf_counter() - started

        big = asyncio.create_task(api.store_many(a, "n", big_batch()))
        started = time.perf_counter()
        await asyncio.sleep(0.5)  # the big batch holds the model
        beside = []
        for _ in range(args.rounds):
            ms = await timed_small()
            if big.done():
                break  # only batches that ran wholly beside the big one count
            beside.append(ms)
        await big
        big_beside_s = time.perf_counter() - started
        alone += [await timed_small() for _ in range(args.rounds)]

        # The same beside the model alone (no PostgreSQL): B's embedding while A's is in flight.
        small_texts = [m.content for m in small_batch()]

        async def timed_embed() -> float:
            started = time.perf_counter()
            await embedder.embed(small_texts, tenant=b.tenant_id)
            return (time.perf_counter() - started) * 1000

        embed_alone = [await timed_embed() for _ in range(args.rounds)]
        big = asyncio.create_task(embedder.embed([m.content for m in big_batch()], tenant=a.tenant_id))
        await asyncio.sleep(0.5)
        embed_beside = []
        for _ in range(args.rounds):
            ms = await timed_embed()
            if big.done():
                break
            embed_beside.append(ms)
        await big
        embed_alone += [await timed_embed() for _ in range(args.rounds)]

        # A lone caller: 128 of the long texts sliced into turns, and through one plain encode call
        # (what it ran before), in turn, the faster of two each.
        texts = [m.content for m in big_batch()][:128]
        sliced, plain = [], []
        for _ in range(2):
            started = time.perf_counter()
            await embedder.embed(texts)
            sliced.append(time.perf_counter() - started)
            started = time.perf_counter()
            await asyncio.to_thread(
                embedder._model.encode, texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True
            )
            plain.append(time.perf_counter() - started)
        sliced_s, encode_s = min(sliced), min(plain)

    if not beside or not embed_beside:
        print("the big batch finished before any small batch ran beside it: raise --big")
        return 1
    small_alone, small_beside = statistics.median(alone), statistics.median(beside)
    e_alone, e_beside = statistics.median(embed_alone), statistics.median(embed_beside)
    print(f"big batch: {args.big} x {len(LONG)} chars (tenant A); small batch: {args.small} short (tenant B)")
    print(f"slice: {embedder._slice_tokens} tokens\n")
    print("| measure | alone | beside the big batch | ratio |")
    print("|---|---|---|---|")
    print(
        f"| small batch, store_many (median of {len(alone)} / {len(beside)}) "
        f"| {small_alone:.0f} ms | {small_beside:.0f} ms | **{small_beside / small_alone:.2f}x** |"
    )
    print(
        f"| small batch, embedding only (median of {len(embed_alone)} / {len(embed_beside)}) "
        f"| {e_alone:.0f} ms | {e_beside:.0f} ms | **{e_beside / e_alone:.2f}x** |"
    )
    print(f"| big batch, store_many | {big_alone_s:.1f} s | {big_beside_s:.1f} s | {big_beside_s / big_alone_s:.2f}x |")
    print(
        f"\nLone caller, {len(texts)} of the long texts: sliced into turns {sliced_s:.2f} s, "
        f"one plain encode() {encode_s:.2f} s ({sliced_s / encode_s:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
