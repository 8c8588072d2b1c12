"""Late interaction (ColBERT-style MaxSim) over MiniLM's contextual token states to tell a subject's
versions of the fact asked about from its other facts (issue 30), offline on the hits
evolving_record.py recorded:

    HF_HUB_OFFLINE=1 PYTHONPATH=services .venv/bin/python loadtests/quality/evolving_record.py --seed 30 --out R30
    HF_HUB_OFFLINE=1 PYTHONPATH=services .venv/bin/python loadtests/quality/evolving_maxsim.py R30 [R31 ...]

For the question and each fused hit: the model's ``last_hidden_state`` (the ONNX session search
uses), the special tokens, the subject's name, stop words and the time-cue words dropped, each
token state at unit length. ``qd`` = mean over the question's tokens of the best cosine to the
memory's tokens, ``dq`` the other way, ``sym`` their mean; ``dd`` memory to memory: a hit's ``sym``
to each of the subject's first PROTOTYPE hits (as the prototype takes them), averaged.

(a) separation: the share of questions (with both a version and another fact of the subject among
the hits) where every version scores above every other fact of the subject, for each score and
for today's prototype cosine; (b) recall@1 per kind end to end if ``timeline.subject`` kept a hit
by a MaxSim rule instead of (or beside) the prototype, the recorded hits run through
``timeline.arrange``; (c) the CPU of encoding one question's hits (one batch on the session).
"""

from __future__ import annotations

import argparse
import pickle
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memvault.retrieval import cues as cue_mod
from memvault.retrieval import timeline
from memvault.retrieval.hits import Hit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evolving_replay import hits_of

KINDS = ("newest", "oldest", "as-of", "in-period", "before/after")
STOP = frozenset(cue_mod.EVENT_STOP | timeline.NOT_NAMES | {"s", "'", "?", ".", ",", "-"})
# Spans of a question that say when, not what.
CUE_SPANS = [
    cue_mod.NEWEST,
    cue_mod.OLDEST,
    cue_mod.BEFORE_ALL,
    cue_mod.AS_OF,
    cue_mod.ISO_DAY,
    cue_mod.DAY_MONTH_YEAR,
    cue_mod.MONTH_DAY_YEAR,
    cue_mod.MONTH_YEAR,
    cue_mod.MONTH_ALONE,
    cue_mod.YEAR,
    re.compile(r"\b(before|after|prior to|back|during|in|since|nowadays|at present|right now|as of now|ended)\b"),
    re.compile(r"\b(?:19|20)\d{2}\b"),
]
WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'.-]*")


@dataclass
class Encoded:
    states: np.ndarray  # kept tokens x 384, unit rows


class TokenModel:
    def __init__(self) -> None:
        from harness import load_embedder

        self.e = load_embedder()
        self.tok = self.e._query_input.tokenizer
        self.inputs = [i.name for i in self.e._single.get_inputs()]

    def run(self, texts: list[str]) -> tuple[np.ndarray, dict[str, Any]]:
        enc = self.tok(
            texts, padding=True, truncation=True, max_length=256, return_offsets_mapping=True, return_tensors="np"
        )
        feeds = {k: enc[k].astype(np.int64) for k in self.inputs}
        (hidden,) = self.e._single.run(None, feeds)
        return hidden, enc

    def encode(self, texts: list[str], drops: list[list[tuple[int, int]]], names: set[str]) -> list[Encoded]:
        hidden, enc = self.run(texts)
        out = []
        for row, text in enumerate(texts):
            keep = []
            words = [(m.start(), m.end(), m.group().lower()) for m in WORD.finditer(text)]
            for t, (a, b) in enumerate(enc["offset_mapping"][row]):
                if b <= a or not enc["attention_mask"][row][t]:
                    continue  # special or padding
                word = next((w for s, e, w in words if s <= a < e), None)
                if word is None:
                    continue  # punctuation
                w = word.strip(".'").removesuffix("'s")
                if w in names or w in STOP or any(s <= a < e for s, e in drops[row]):
                    continue
                keep.append(t)
            states = hidden[row, keep] if keep else hidden[row, :1]
            states = states / np.clip(np.linalg.norm(states, axis=1, keepdims=True), 1e-12, None)
            out.append(Encoded(states))
        return out


def question_names(query: str) -> set[str]:
    return {
        w.lower().removesuffix("'s")
        for w in timeline.NAME.findall(query)
        if w[0].isupper() and w.lower() not in timeline.NOT_NAMES
    }


def cue_spans(query: str) -> list[tuple[int, int]]:
    q = query.lower()
    return [m.span() for rx in CUE_SPANS for m in rx.finditer(q)]


def maxsim(q: Encoded, d: Encoded) -> tuple[float, float]:
    sims = q.states @ d.states.T
    return float(sims.max(axis=1).mean()), float(sims.max(axis=0).mean())


def unit(v: list[float]) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64)
    return a / (np.linalg.norm(a) or 1.0)


def prototype_cos(
    query: str, hits: list[Hit], vectors: dict[str, list[float]], event: tuple[str, ...]
) -> dict[str, float]:
    near = timeline._near(query, hits, event)
    known = [i for i in near if hits[i].memory.id in vectors]
    if not known:
        return {}
    head = [vectors[hits[i].memory.id] for i in known[: timeline.PROTOTYPE]]
    proto = unit([sum(xs) / len(head) for xs in zip(*head, strict=True)])
    return {h.memory.id: float(unit(vectors[h.memory.id]) @ proto) for h in hits if h.memory.id in vectors}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("records", type=Path, nargs="+")
    args = parser.parse_args()
    model = TokenModel()
    for path in args.records:
        study(path, model)
    return 0


def study(path: Path, model: TokenModel) -> None:
    recs = [r for r in pickle.loads(path.read_bytes()) if r["kind"] in KINDS and r["arrange"]]
    print(f"\n## {path.name}: {len(recs)} questions with a time cue\n")
    # Token states and scores of every question's hits.
    cpu: list[float] = []
    session: list[float] = []
    wall: list[float] = []
    for r in recs:
        a = r["arrange"]
        texts = [a["query"]] + [h["content"] for h in a["hits"][: timeline.FETCH]]
        names = question_names(a["query"])
        drops = [cue_spans(a["query"])] + [[] for _ in texts[1:]]
        t0, c0 = time.perf_counter(), time.process_time()
        enc = model.encode(texts, drops, names)
        c1 = time.process_time()
        model.run(texts)
        session.append(time.process_time() - c1)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        q = enc[0]
        r["ms"] = {}
        for h, d in zip(a["hits"], enc[1:], strict=False):
            qd, dq = maxsim(q, d)
            r["ms"][h["id"]] = {"qd": qd, "dq": dq, "sym": (qd + dq) / 2}
        cues = a["cues"]
        hits = hits_of(a)
        if cues.fused_window:
            tp = {h["id"]: h["time_part"] for h in a["hits"]}
            hits.sort(key=lambda h: h.score - tp[h.memory.id], reverse=True)
        # Memory to memory: each hit's symmetric MaxSim to the first PROTOTYPE near hits (the
        # subject's best hits, as the prototype takes them), averaged ("dd").
        by_id = {h["id"]: d for h, d in zip(a["hits"], enc[1:], strict=False)}
        near = timeline._near(a["query"], hits, () if cues.fused_window else cues.event)
        heads = [by_id[hits[i].memory.id] for i in near[: timeline.PROTOTYPE] if hits[i].memory.id in by_id]
        for mid, d in by_id.items():
            r["ms"][mid]["dd"] = float(np.mean([sum(maxsim(h, d)) / 2 for h in heads]))
        r["proto"] = prototype_cos(a["query"], hits, a["vectors"], () if cues.fused_window else cues.event)
    ms = {name: 1000 * np.array(xs) for name, xs in (("cpu", cpu), ("session", session), ("wall", wall))}
    print(
        f"encode question + {np.mean([len(r['arrange']['hits'][: timeline.FETCH]) for r in recs]):.1f} hits "
        f"(one batch): CPU mean {ms['cpu'].mean():.1f} ms, p50 {np.median(ms['cpu']):.1f} ms, wall p50 "
        f"{np.median(ms['wall']):.1f} ms (with the token masks in Python); tokenizer + session alone: CPU mean "
        f"{ms['session'].mean():.1f} ms, p50 {np.median(ms['session']):.1f} ms\n"
    )
    separation(recs)
    end_to_end(recs)


def roles(r: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Ids of the hits that are versions of the fact asked about, and the subject's other facts."""
    prefix = f"{r['subject']}|"
    versions = [h["id"] for h in r["arrange"]["hits"] if h["ref"].startswith(f"{prefix}{r['attribute']}|")]
    others = [h["id"] for h in r["arrange"]["hits"] if h["ref"].startswith(prefix) and h["id"] not in versions]
    return versions, others


def separation(recs: list[dict[str, Any]]) -> None:
    scores: dict[str, Callable[[dict[str, Any], str], float | None]] = {
        "prototype cosine": lambda r, i: r["proto"].get(i),
        "MaxSim q->d": lambda r, i: r["ms"].get(i, {}).get("qd"),
        "MaxSim d->q": lambda r, i: r["ms"].get(i, {}).get("dq"),
        "MaxSim sym": lambda r, i: r["ms"].get(i, {}).get("sym"),
        "MaxSim memory-memory (dd)": lambda r, i: r["ms"].get(i, {}).get("dd"),
    }
    for w in (0.5, 1.0, 2.0):
        scores[f"prototype + {w} x q->d"] = lambda r, i, w=w: (
            None if r["proto"].get(i) is None or i not in r["ms"] else r["proto"][i] + w * r["ms"][i]["qd"]
        )
    print("(a) every version above every other fact of the subject, share of questions with both among the hits\n")
    print("| score | " + " | ".join(KINDS) + " | all |")
    print("|---|" + "---|" * (len(KINDS) + 1))
    for name, f in scores.items():
        cells = []
        for kind in (*KINDS, "all"):
            ok = n = 0
            for r in recs:
                if kind != "all" and r["kind"] != kind:
                    continue
                v, o = roles(r)
                sv = [f(r, i) for i in v]
                so = [f(r, i) for i in o]
                if not v or not o or None in sv or None in so:
                    continue
                n += 1
                ok += min(sv) > max(so)  # type: ignore[type-var,operator]
            cells.append(f"{ok / n:.3f} ({n})" if n else "-")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()


Rule = Callable[[dict[str, Any], list[Hit], list[int], dict[str, float]], list[int]]


def end_to_end(recs: list[dict[str, Any]]) -> None:
    """recall@1 per kind with ``timeline.subject`` replaced by each rule, on the recorded hits."""
    real_subject = timeline.subject
    current: dict[str, Any] = {}

    def rule_subject(make: Rule) -> Callable[..., list[int]]:
        def subject(query, hits, vectors, event=()):  # type: ignore[no-untyped-def]
            if not hits:
                return []
            near = timeline._near(query, hits, event)
            proto_kept = real_subject(query, hits, vectors, event)
            return make(current["r"], hits, near, {"proto": proto_kept})  # type: ignore[dict-item]

        return subject

    def ms_of(r: dict[str, Any], h: Hit, key: str) -> float:
        return r["ms"].get(h.memory.id, {}).get(key, -1.0)

    def relative(key: str, d: float, with_proto: bool = False) -> Rule:
        def rule(r, hits, near, extra):  # type: ignore[no-untyped-def]
            top = ms_of(r, hits[0], key)
            kept = [i for i in near if i == 0 or ms_of(r, hits[i], key) >= top - d]
            if with_proto:
                kept = [i for i in kept if i in extra["proto"]]
            return kept

        return rule

    def absolute(key: str, t: float, with_proto: bool = False) -> Rule:
        def rule(r, hits, near, extra):  # type: ignore[no-untyped-def]
            kept = [i for i in near if i == 0 or ms_of(r, hits[i], key) >= t]
            return [i for i in kept if i in extra["proto"]] if with_proto else kept

        return rule

    def combined(w: float, t: float) -> Rule:
        def rule(r, hits, near, extra):  # type: ignore[no-untyped-def]
            def z(i: int) -> float:
                return r["proto"].get(hits[i].memory.id, -1.0) + w * ms_of(r, hits[i], "qd")

            return [i for i in near if i == 0 or z(i) >= t]

        return rule

    def gap(key: str, with_proto: bool = False) -> Rule:
        """The near hits by score, cut at the widest gap below the best hit's score."""

        def rule(r, hits, near, extra):  # type: ignore[no-untyped-def]
            pool = [i for i in near if i in extra["proto"]] if with_proto else near
            s = sorted(pool, key=lambda i: ms_of(r, hits[i], key), reverse=True)
            vals = [ms_of(r, hits[i], key) for i in s]
            if len(s) < 3:
                return sorted(set(pool) | {0})
            gaps = [vals[k] - vals[k + 1] for k in range(len(vals) - 1)]
            cut = int(np.argmax(gaps)) + 1
            kept = set(s[:cut]) | {0}
            return sorted(kept)

        return rule

    rules: dict[str, Rule] = {"prototype (today)": lambda r, hits, near, extra: extra["proto"]}
    for key in ("qd", "sym", "dd"):
        for d in (0.05, 0.10, 0.15, 0.20):
            rules[f"{key} >= best - {d:.2f}"] = relative(key, d)
            rules[f"{key} >= best - {d:.2f} and prototype"] = relative(key, d, True)
        for t in (0.3, 0.4, 0.5, 0.6, 0.7):
            rules[f"{key} >= {t:.1f} (absolute)"] = absolute(key, t)
            rules[f"{key} >= {t:.1f} (absolute) and prototype"] = absolute(key, t, True)
        rules[f"{key} gap cut"] = gap(key)
        rules[f"{key} gap cut within prototype"] = gap(key, True)
    for w in (0.5, 1.0):
        for t in (0.9, 1.0, 1.1, 1.2, 1.3):
            rules[f"prototype + {w} x qd >= {t:.1f}"] = combined(w, t)
    rules["oracle (the generator's versions, near)"] = lambda r, hits, near, extra: [
        i for i in near if i == 0 or hits[i].memory.id in roles(r)[0]
    ]
    print("(b) recall@1 end to end, the recorded hits through timeline.arrange with subject() replaced\n")
    print("| rule | " + " | ".join(KINDS) + " | all |")
    print("|---|" + "---|" * (len(KINDS) + 1))
    recorded = {k: np.mean([r["retrieved"][:1] == [r["expected"]] for r in recs if r["kind"] == k]) for k in KINDS}
    print(
        "| recorded run | " + " | ".join(f"{recorded[k]:.3f}" for k in KINDS) + " | "
        f"{np.mean([r['retrieved'][:1] == [r['expected']] for r in recs]):.3f} |"
    )
    try:
        for name, rule in rules.items():
            timeline.subject = rule_subject(rule)  # type: ignore[assignment]
            got: dict[str, list[bool]] = {k: [] for k in KINDS}
            for r in recs:
                current["r"] = r
                a = r["arrange"]
                hits = hits_of(a)
                tp = {h["id"]: h["time_part"] for h in a["hits"]}
                out = timeline.arrange(
                    a["query"], hits, a["cues"], a["vectors"], a["limit"], lambda h, tp=tp: tp[h.memory.id]
                )
                ref = {h["id"]: h["ref"] for h in a["hits"]}
                got[r["kind"]].append(bool(out.hits) and ref[out.hits[0].memory.id] == r["expected"])
            allv = [x for xs in got.values() for x in xs]
            print(f"| {name} | " + " | ".join(f"{np.mean(got[k]):.3f}" for k in KINDS) + f" | {np.mean(allv):.3f} |")
    finally:
        timeline.subject = real_subject  # type: ignore[assignment]
    print()


if __name__ == "__main__":
    sys.exit(main())
