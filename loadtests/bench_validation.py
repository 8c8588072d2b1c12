"""What validating a write costs: a batch of 1,000 memories through the request model, which runs
the text rule and the secrets guard on every stored string (fields.Body).

    PYTHONPATH=services .venv/bin/python loadtests/bench_validation.py [--rounds 5]
    PYTHONPATH=<checkout of 83c8d0a>/services .venv/bin/python loadtests/bench_validation.py --service-guard

Prints the best of N rounds, per batch and per memory. Compare with the batch's embedding time
(about 3 s for 1,000 short memories on 2 cores), which dominates a write."""

from __future__ import annotations

import argparse
import time

from memvault.guard import ensure_no_secrets
from memvault.memories.schemas import MemoryBatchIn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument(
        "--service-guard",
        action="store_true",
        help="also guard content and metadata as main's service did (run with main's code to compare)",
    )
    args = parser.parse_args()
    items = [
        {
            "content": f"Ana prefers window seats on flight number {i} to Lisbon, and coffee with oat milk.",
            "key": f"k{i}",
            "user_id": "ana",
            "metadata": {"source": "chat", "tags": ["travel", "pref"]},
        }
        for i in range(args.size)
    ]
    best = float("inf")
    for _ in range(args.rounds):
        started = time.perf_counter()
        batch = MemoryBatchIn.model_validate({"memories": items})
        if args.service_guard:
            for m in batch.memories:
                ensure_no_secrets(m.content, field="content")
                ensure_no_secrets(m.metadata, field="metadata")
        best = min(best, time.perf_counter() - started)
    per = best / args.size * 1e6
    print(f"{args.size} memories: {best * 1000:.1f} ms ({per:.0f} us a memory), best of {args.rounds}")


if __name__ == "__main__":
    main()
