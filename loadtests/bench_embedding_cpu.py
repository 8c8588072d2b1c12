"""CPU per text of the local MiniLM on ONNX Runtime, graph variants side by side (issue 25).

    HF_HUB_OFFLINE=1 PYTHONPATH=services .venv/bin/python loadtests/bench_embedding_cpu.py \\
        [--data PATH] [--rounds 5] [--cosine 3000] [--variants fp32 fused int8 fused-int8]

Variants, each an ONNX Runtime session (one intra-op thread) behind the embedder's own code
(tokenizer, session run, numpy pooling):

- ``fp32``: the export the service runs (embeddings/local.py).
- ``fused``: the same transformer exported with eager attention, then ONNX Runtime's transformer
  optimizer (``model_type="bert"``, 12 heads, hidden 384: the model's config) fusing embedding +
  LayerNorm, attention, SkipLayerNorm and BiasGelu. (The service's export, with the model's
  default SDPA attention, fuses all but attention and embedding: no different from what the
  session's own optimizer does.)
- ``int8``: the service's ``quantize="int8"`` (dynamic quantization of the fp32 export: QInt8
  weights per channel, the matrix products only).
- ``fused-int8``: ``fused`` quantized the same way.

Workloads, from LoCoMo read in place (never copied into the repo): single questions (a search's
query, one run each), questions 2/4/8 at a time (what the micro-batcher runs under load), one
stored turn at a time, and stored turns 10 at a time through ``embed`` (the fair-turn slices).
Variants alternate within every round; the figure is the process's CPU time (time.process_time)
per text, not wall time, since other processes share the cores. ``--cosine N`` also compares N
turns' vectors of each variant with torch's (sentence-transformers' ``encode``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from harness import DEFAULT_DATA, MODEL, pct, sessions

WORKLOADS = ["query x1", "query x2", "query x4", "query x8", "store x1", "store batch of 10"]


def texts_of(data: Path) -> tuple[list[str], list[str]]:
    convs = json.loads(data.read_text())
    turns = [f"{t['speaker']}: {t['text']}" for c in convs for _, _, ts in sessions(c) for t in ts]
    questions = [q["question"] for c in convs for q in c["qa"] if q.get("question")]
    return turns, questions


def session(path: Path) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def fused_export(base: Any, folder: Path) -> Path:
    """The service's export with eager attention, through the transformer optimizer."""
    from onnxruntime.transformers.optimizer import optimize_model

    model = base._model
    transformer = model[0].auto_model
    config = transformer.config
    plain = folder / "eager.onnx"
    before = config._attn_implementation
    transformer.set_attn_implementation("eager")
    try:
        base._export(model, plain)
    finally:
        transformer.set_attn_implementation(before)
    optimized = optimize_model(
        str(plain), model_type="bert", num_heads=config.num_attention_heads, hidden_size=config.hidden_size
    )
    print("fused operators:", {k: v for k, v in optimized.get_fused_operator_statistics().items() if v})
    target = folder / "fused.onnx"
    optimized.save_model_to_file(str(target))
    return target


def int8_of(source: Path) -> Path:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target = source.with_name(f"{source.stem}-int8.onnx")
    # A fused graph's contrib operators defeat the quantizer's type inference: float unless told.
    quantize_dynamic(  # as embeddings/local.py quantizes the service's export
        source,
        target,
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul", "Attention"],  # a fused graph's attention holds Q, K, V
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    return target


def variant(base: Any, single: Any) -> Any:
    """An embedder sharing ``base``'s model and tokenizer, running ``single``."""
    from memvault.embeddings.local import LocalEmbedder

    emb = LocalEmbedder(MODEL, dim=384, cache_size=0)
    emb._model, emb._query_input, emb._single = base._model, base._query_input, single
    return emb


def run_workload(emb: Any, name: str, turns: list[str], questions: list[str], at: int, n: int) -> int:
    """Runs ``n`` texts of workload ``name`` from position ``at``; returns the texts embedded."""
    done = 0
    if name.startswith("query"):
        k = int(name.split("x")[1])
        while done < n:
            emb._encode_counted([questions[(at + done + i) % len(questions)] for i in range(k)])
            done += k
    elif name == "store x1":
        for i in range(n):
            emb._encode_counted([turns[(at + i) % len(turns)]])
        done = n
    else:
        while done < n:
            asyncio.run(emb.embed([turns[(at + done + i) % len(turns)] for i in range(10)]))
            done += 10
    return done


def stages(emb: Any, questions: list[str], n: int = 300) -> dict[str, float]:
    """CPU ms of one query's tokenizer, session run and pooling, apart."""
    from memvault.embeddings.local import _features, _pooled

    cpu: dict[str, float] = defaultdict(float)
    for i in range(n):
        t0 = time.process_time()
        feats = {k: v.numpy() for k, v in _features(emb._query_input, [questions[i % len(questions)]]).items()}
        t1 = time.process_time()
        (hidden,) = emb._single.run(None, feats)
        t2 = time.process_time()
        _pooled(hidden, feats["attention_mask"]).tolist()
        t3 = time.process_time()
        cpu["tokenize"] += t1 - t0
        cpu["run"] += t2 - t1
        cpu["pool"] += t3 - t2
    return {k: v * 1000 / n for k, v in cpu.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--texts", type=int, default=80, help="texts per workload, variant and round")
    parser.add_argument("--cosine", type=int, default=0, help="turns to compare with torch's vectors")
    parser.add_argument("--variants", nargs="+", default=["fp32", "fused", "int8", "fused-int8"])
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="memvault-bench-embedding-") as tmp:
        return measure(args, Path(tmp))


def measure(args: argparse.Namespace, folder: Path) -> int:
    from memvault.embeddings.local import LocalEmbedder

    turns, questions = texts_of(args.data)
    base = LocalEmbedder(MODEL, dim=384, cache_size=0, onnx_dir=folder)
    base.load()
    int8 = LocalEmbedder(MODEL, dim=384, cache_size=0, onnx_dir=folder, quantize="int8")
    int8.load()
    sessions_: dict[str, Any] = {"fp32": base._single, "int8": int8._single}
    if {"fused", "fused-int8"} & set(args.variants):
        fused = fused_export(base, folder)
        sessions_["fused"] = session(fused)
        if "fused-int8" in args.variants:
            sessions_["fused-int8"] = session(int8_of(fused))
    embedders = {v: variant(base, sessions_[v]) for v in args.variants}

    for emb in embedders.values():  # warm-up: a session's first runs are slower
        for name in WORKLOADS:
            run_workload(emb, name, turns, questions, 0, 10)

    load = os.getloadavg()
    cpu: dict[tuple[str, str], float] = defaultdict(float)
    texts: dict[tuple[str, str], int] = defaultdict(int)
    for r in range(args.rounds):
        for name in WORKLOADS:
            for v, emb in embedders.items():  # alternating: every variant runs on the same texts
                started = time.process_time()
                texts[v, name] += run_workload(emb, name, turns, questions, r * args.texts, args.texts)
                cpu[v, name] += time.process_time() - started
    after = os.getloadavg()

    print(f"\nload average before {load[0]:.2f} {load[1]:.2f}, after {after[0]:.2f} {after[1]:.2f}; ")
    print(f"{args.rounds} rounds x {args.texts} texts per workload and variant\n")
    print(
        "| workload | "
        + " | ".join(f"{v} CPU ms/text" for v in embedders)
        + " | "
        + " | ".join(f"{v} / fp32" for v in embedders if v != "fp32")
        + " |"
    )
    print("|---" * (2 * len(embedders)) + "|")
    for name in WORKLOADS:
        per = {v: cpu[v, name] * 1000 / texts[v, name] for v in embedders}
        ratios = [f"{per[v] / per['fp32']:.2f}" for v in embedders if v != "fp32"] if "fp32" in per else []
        print(f"| {name} | " + " | ".join(f"{per[v]:.2f}" for v in embedders) + " | " + " | ".join(ratios) + " |")

    print("\nOne query, CPU ms by stage:")
    for v, emb in embedders.items():
        print(f"- {v}: " + ", ".join(f"{k} {ms:.3f}" for k, ms in stages(emb, questions).items()))

    if args.cosine:
        sample = turns[:: max(1, len(turns) // args.cosine)][: args.cosine]
        reference = base._model.encode(sample, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
        print(f"\nCosine to torch's vectors over {len(sample)} LoCoMo turns (batches of 64 through embed):")
        print("| variant | min | p1 | mean | max abs difference | alone vs in batch: min | mean |")
        print("|---|---|---|---|---|---|---|")
        for v, emb in embedders.items():
            vectors = np.asarray(asyncio.run(emb.embed(sample)))
            cos = (vectors * reference).sum(axis=1) / np.linalg.norm(vectors, axis=1)
            # The same text alone (a query, one run) against its vector from the batch above.
            alone = np.asarray([emb._encode_counted([t])[0][0] for t in sample[: args.cosine // 10]])
            self_cos = (alone * vectors[: len(alone)]).sum(axis=1)
            print(
                f"| {v} | {cos.min():.6f} | {pct(cos.tolist(), 1):.6f} | {cos.mean():.6f} "
                f"| {np.abs(vectors - reference).max():.2e} | {self_cos.min():.6f} | {self_cos.mean():.6f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
