"""Pseudo-relevance feedback and neighbourhood steps for multi-hop questions, tried offline on
LoCoMo before any of them goes into the search statement (issue 30, item 3).

    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/quality/feedback_offline.py dump PATH [--conversations 10]
    .venv/bin/python loadtests/quality/feedback_offline.py simulate PATH
    .venv/bin/python loadtests/quality/feedback_offline.py halves PATH
    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/quality/feedback_offline.py context PATH

``dump`` ingests LoCoMo as locomo.py does (issue 4 protocol), searches every question through the
facade twice (limit 10: the served list; limit 100: a wider candidate list with each hit's fused
score), and pickles that with every memory's stored vector, session and text. ``simulate``
re-ranks each question's limit-100 list with one step at a time and prints recall@10 per
category beside the served list's:

- dense PRF (Rocchio): the centroid of the best m hits' vectors, as a re-ranking value
  (``rerank``) or as a second nearest-vector pass from query + centroid (``expand``);
- lexical PRF (RM3): the best m hits' most distinctive terms (BM25 in Python), a second word pass;
- session window: the turns within W of the best m hits in their session;
- session diversity: at most ``per`` hits from one session in the top 10;
- MMR: maximal marginal relevance (each next hit penalised by its cosine to those chosen);
- entity hop: the memories sharing an entity the rule extractor finds in a top hit (the step
  ``SearchIn.hops`` serves), with the extractor's entities linked to every turn;
- context vectors (``context``): each turn embedded again with the turns around it, or its vector
  plus its neighbours' mean, as a second dense value and a second nearest-vector pass.

Each adds w times its value scaled to 0..1 to the hit's fused score. The limit-100 list is drawn
from 500 candidates a channel where the served one has 50: its own top 10 is within 0.005 of the
served list's, the baseline each step is compared with."""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import json
import math
import pickle
import re
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # loadtests/: the shared harness
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import DEFAULT_DATA, embedded_app
from locomo import ingest
from protocol import CATEGORIES, questions_of, reference_time


async def dump(path: Path, data: list[dict[str, Any]]) -> None:
    from sqlalchemy import text

    from memvault.namespaces.schemas import NamespaceIn
    from memvault.principal import Principal
    from memvault.retrieval.schemas import SearchIn

    async with embedded_app("memvault-feedback-") as stack:
        api = stack.api
        tenant = await api.create_tenant(f"feedback-{uuid.uuid4().hex[:8]}")
        p = Principal.system(tenant.id, subject="bench")
        for conv in data:
            await api.create_namespace(p, NamespaceIn(name=conv["sample_id"]))
            await ingest(api, p, conv["sample_id"], conv)
        qs = []
        for conv in data:
            ref = reference_time(conv)
            for q in questions_of(conv):
                wide = await api.search(p, q.namespace, SearchIn(query=q.text, limit=100, reference_time=ref))
                served = await api.search(p, q.namespace, SearchIn(query=q.text, limit=10, reference_time=ref))
                qs.append(
                    {
                        "ns": q.namespace,
                        "cat": q.category,
                        "text": q.text,
                        "ev": q.evidence,
                        "qv": await stack.embedder.embed_query(q.text),
                        "hits": [(r.memory.metadata.get("dia_id"), r.score, r.memory.id) for r in wide.results],
                        "top10": [r.memory.metadata.get("dia_id") for r in served.results],
                    }
                )
        mems = {}
        async with api._db.tenant_tx(tenant.id) as tx:
            rows = await tx.session.execute(
                text(
                    "select m.id, n.name, m.metadata->>'dia_id', m.content, m.session_id, m.embedding::text "
                    "from memories m join namespaces n on n.id = m.namespace_id"
                )
            )
            for r in rows:
                mems[r[0]] = {"ns": r[1], "dia": r[2], "content": r[3], "session": r[4], "emb": json.loads(r[5])}
    await asyncio.to_thread(path.write_bytes, pickle.dumps({"qs": qs, "mems": mems}))


STOP_WORDS = (
    "a an the and or but if of to in on at for with by from is are was were be been being do does did have has had "
    "i you he she it we they me him her us them my your his its our their what which who whom this that these "
    "those am will would can could should how when where why not no so as than too very just about into over "
    "after before also any all some there here then out up down more most other such only own same s t don"
)
STOP = frozenset(STOP_WORDS.split())


def toks(s: str) -> list[str]:
    return [w.rstrip("s") if len(w) > 3 else w for w in re.findall(r"[a-z0-9]+", s.lower()) if w not in STOP]


def unit(v: Any) -> Any:
    return v / (np.linalg.norm(v) + 1e-9)


def rel(x: Any) -> Any:
    lo, hi = x.min(), x.max()
    return (x - lo) / (hi - lo + 1e-9)


class Sim:
    def __init__(self, d: dict[str, Any]) -> None:
        from memvault.extraction.rules import find_entities

        self.qs, self.mems = d["qs"], d["mems"]
        self.byns: dict[str, list[Any]] = collections.defaultdict(list)
        for mid, m in self.mems.items():
            self.byns[m["ns"]].append(mid)
        self.E = {mid: np.array(m["emb"], dtype=np.float32) for mid, m in self.mems.items()}
        self.pos = {}
        for mid, m in self.mems.items():
            s, t = m["dia"][1:].split(":")
            self.pos[mid] = (int(s), int(t))
        self.bypos = {(m["ns"], *self.pos[mid]): mid for mid, m in self.mems.items()}
        self.docs = {}
        for ns, ids in self.byns.items():
            tf = {i: collections.Counter(toks(self.mems[i]["content"])) for i in ids}
            df = collections.Counter(w for c in tf.values() for w in c)
            lengths = {i: sum(c.values()) for i, c in tf.items()}
            self.docs[ns] = (ids, tf, df, lengths, float(np.mean(list(lengths.values()))))
        self.ents: dict[Any, set[str]] = {}
        self.links: dict[tuple[str, str], set[Any]] = collections.defaultdict(set)
        for mid, m in self.mems.items():
            speaker, _, said = m["content"].partition(": ")
            self.ents[mid] = {n.lower() for n, _ in find_entities(said, speaker)}
            for e in self.ents[mid]:
                self.links[(m["ns"], e)].add(mid)

    def report(self, name: str, fn: Callable[[dict[str, Any]], list[str]], part: set[str] | None = None) -> None:
        per: dict[int, list[float]] = collections.defaultdict(list)
        for q in self.qs:
            if part is not None and q["ns"] not in part:
                continue
            top = set(fn(q)[:10])
            per[q["cat"]].append(sum(e in top for e in q["ev"]) / len(q["ev"]))
        every = [x for v in per.values() for x in v]
        cells = " | ".join(f"{np.mean(per[c]):.3f}" for c in CATEGORIES)
        print(f"| {name} | {np.mean(every):.3f} | {cells} |")

    def merged(self, q: dict[str, Any], extra: dict[Any, float], w: float) -> list[str]:
        """The limit-100 list plus ``extra`` (memory -> value 0..1), by fused score + w * value."""
        base = {h[2]: h[1] for h in q["hits"]}
        cand = set(base) | set(extra)
        score = {c: base.get(c, 0.0) + w * extra.get(c, 0.0) for c in cand}
        return [self.mems[c]["dia"] for c in sorted(cand, key=lambda c: -score[c])]

    def rerank(self, q: dict[str, Any], m: int, w: float) -> list[str]:
        ids = [h[2] for h in q["hits"]]
        c = unit(np.mean([self.E[i] for i in ids[:m]], axis=0))
        values = rel(np.array([self.E[i] @ c for i in ids]))
        return self.merged(q, dict(zip(ids, values, strict=True)), w)

    def expand(self, q: dict[str, Any], m: int, w: float, beta: float) -> list[str]:
        ids = [h[2] for h in q["hits"]]
        c = unit(unit(np.array(q["qv"])) + beta * unit(np.mean([self.E[i] for i in ids[:m]], axis=0)))
        pool = self.byns[q["ns"]]
        cos = np.stack([self.E[i] for i in pool]) @ c
        cand = list(set(ids) | {pool[j] for j in np.argsort(-cos)[:50]})
        values = rel(np.array([self.E[i] @ c for i in cand]))
        return self.merged(q, dict(zip(cand, values, strict=True)), w)

    def rm3(self, q: dict[str, Any], m: int, nterms: int, w: float) -> list[str]:
        ids, tf, df, lengths, avg = self.docs[q["ns"]]
        n = len(ids)
        asked = set(toks(q["text"]))
        weight: collections.Counter[str] = collections.Counter()
        for h in q["hits"][:m]:
            c = tf[h[2]]
            total = sum(c.values()) or 1
            for t, f in c.items():
                if t not in asked and df[t] <= n / 20:  # speaker names are in every turn
                    weight[t] += (f / total) * math.log(n / df[t])
        terms = dict(weight.most_common(nterms))
        if not terms:
            return [h[0] for h in q["hits"]]
        qw = {t: v / max(terms.values()) for t, v in terms.items()} | dict.fromkeys(asked, 1.0)
        scores = {}
        for i in ids:
            s = 0.0
            for t, qt in qw.items():
                f = tf[i].get(t, 0)
                if f:
                    idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                    s += qt * idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * lengths[i] / avg))
            if s:
                scores[i] = s
        top = sorted(scores, key=lambda i: -scores[i])[:50]
        best = max(scores.values()) if scores else 1.0
        extra = {i: scores[i] / best for i in set(top) | {h[2] for h in q["hits"]} if i in scores}
        return self.merged(q, extra, w)

    def window(self, q: dict[str, Any], m: int, width: int, w: float) -> list[str]:
        best = q["hits"][0][1] or 1.0
        near: dict[Any, float] = collections.defaultdict(float)
        for h in q["hits"][:m]:
            s, t = self.pos[h[2]]
            for dt in range(-width, width + 1):
                mid = self.bypos.get((q["ns"], s, t + dt))
                if dt and mid is not None:
                    near[mid] = max(near[mid], (h[1] / best) * (1 - abs(dt) / (width + 1)))
        return self.merged(q, near, w)

    def window_served(self, q: dict[str, Any], n: int, width: int, w: float) -> list[str]:
        """The session window over the fused list's best ``n`` only (no candidate added): what a
        search could do in Python with ``n`` fused rows, as the timeline does with 20."""
        hits = q["hits"][:n]
        s, t = self.pos[hits[0][2]]
        score = {}
        for h in hits:
            hs, ht = self.pos[h[2]]
            near = hs == s and 0 < abs(ht - t) <= width
            score[h[2]] = h[1] + (w * (1 - abs(ht - t) / (width + 1)) if near else 0.0)
        return [self.mems[c]["dia"] for c in sorted(score, key=lambda c: -score[c])]

    def diversify(self, q: dict[str, Any], per: int) -> list[str]:
        out, rest, count = [], [], collections.Counter[Any]()
        for h in q["hits"][:30]:
            session = self.mems[h[2]]["session"]
            (out if count[session] < per else rest).append(h[0])
            count[session] += 1
        return out + rest

    def mmr(self, q: dict[str, Any], lam: float, depth: int) -> list[str]:
        """Maximal marginal relevance over the best ``depth``: each next hit the one with the best
        lam x fused score (scaled to 0..1) - (1 - lam) x its cosine to the closest hit chosen."""
        ids = [h[2] for h in q["hits"][:depth]]
        value = rel(np.array([h[1] for h in q["hits"][:depth]]))
        vectors = [unit(self.E[i]) for i in ids]
        chosen: list[int] = []
        rest = list(range(len(ids)))
        while rest and len(chosen) < 10:
            best = max(
                rest,
                key=lambda i: (
                    lam * value[i] - (1 - lam) * max((float(vectors[i] @ vectors[j]) for j in chosen), default=0.0)
                ),
            )
            chosen.append(best)
            rest.remove(best)
        return [self.mems[ids[i]]["dia"] for i in chosen + rest]

    def hop(self, q: dict[str, Any], seeds: int, max_links: int, added: int, decay: float) -> list[str]:
        qv = np.array(q["qv"])
        asked = {w.lower() for w in re.findall(r"\w+", q["text"])}
        hits = [(h[1], h[2]) for h in q["hits"][:10]]
        seen = {m for _, m in hits}
        reached: dict[Any, float] = {}
        for score, seed in hits[:seeds]:
            seed_cos = float(self.E[seed] @ qv)
            for e in self.ents[seed] - asked:
                linked = self.links[(q["ns"], e)]
                if len(linked) > max_links:
                    continue
                for mid in linked - seen:
                    closeness = min(1.0, max(float(self.E[mid] @ qv), 0.0) / seed_cos) if seed_cos > 0 else 0.0
                    reached[mid] = max(reached.get(mid, 0.0), score * decay * (1 + closeness) / 2)
        joined = hits + [(s, m) for m, s in sorted(reached.items(), key=lambda x: -x[1])[:added]]
        return [self.mems[m]["dia"] for _, m in sorted(joined, key=lambda x: -x[0])]


async def context_texts(sim: Sim, width: tuple[int, int]) -> dict[Any, Any]:
    """Each turn embedded with the ``width`` (before, after) turns around it in its session."""
    from harness import MODEL

    from memvault.embeddings.local import LocalEmbedder

    emb = LocalEmbedder(MODEL, dim=384, cache_size=0)
    ids = list(sim.mems)
    texts = []
    for mid in ids:
        ns, (s, t) = sim.mems[mid]["ns"], sim.pos[mid]
        around = [sim.bypos.get((ns, s, t + d)) for d in range(-width[0], width[1] + 1)]
        texts.append("\n".join(sim.mems[m]["content"] for m in around if m is not None))
    vectors = []
    for i in range(0, len(texts), 64):
        vectors.extend(await emb.embed(texts[i : i + 64]))
    return {mid: unit(np.array(v, dtype=np.float32)) for mid, v in zip(ids, vectors, strict=True)}


def smoothed(sim: Sim, a: float, width: int) -> dict[Any, Any]:
    """Each turn's vector plus ``a`` times the mean of its ``width`` neighbours a side."""
    out = {}
    for mid, m in sim.mems.items():
        s, t = sim.pos[mid]
        near = [sim.bypos.get((m["ns"], s, t + d)) for d in range(-width, width + 1) if d]
        near = [n for n in near if n is not None]
        v = sim.E[mid] + (a * np.mean([sim.E[n] for n in near], axis=0) if near else 0)
        out[mid] = unit(v)
    return out


def with_context(sim: Sim, q: dict[str, Any], C: dict[Any, Any], w: float, new: int) -> list[str]:
    """The limit-100 list plus the ``new`` nearest by context vector, by fused + w * context cosine."""
    ids = [h[2] for h in q["hits"]]
    qv = unit(np.array(q["qv"], dtype=np.float32))
    cand = list(ids)
    if new:
        pool = sim.byns[q["ns"]]
        cos = np.stack([C[i] for i in pool]) @ qv
        cand = list(dict.fromkeys(ids + [pool[j] for j in np.argsort(-cos)[:new]]))
    values = rel(np.array([C[i] @ qv for i in cand]))
    return sim.merged(q, dict(zip(cand, values, strict=True)), w)


def context(path: Path) -> None:
    """Context vectors: a turn embedded with the turns around it, a second dense value."""
    sim = Sim(pickle.loads(path.read_bytes()))
    variants = {f"text -{b}+{a}": asyncio.run(context_texts(sim, (b, a))) for b, a in ((1, 0), (1, 1), (2, 0))}
    for a, width in itertools.product((0.5, 1.0), (1, 2)):
        variants[f"smoothed a={a} W={width}"] = smoothed(sim, a, width)
    print("| step | all | " + " | ".join(CATEGORIES.values()) + " |")
    print("|---|---|" + "---|" * len(CATEGORIES))
    sim.report("served list (server defaults)", lambda q: q["top10"])
    sim.report("limit-100 list, its top 10", lambda q: [h[0] for h in q["hits"]])
    for name, C in variants.items():
        for w, new in itertools.product((0.1, 0.2, 0.3, 0.5), (0, 50)):
            sim.report(f"{name} w={w} new={new}", lambda q, C=C, w=w, n=new: with_context(sim, q, C, w, n))


def halves(path: Path) -> None:
    """The session window chosen on the first half of the conversations, read on the other half."""
    sim = Sim(pickle.loads(path.read_bytes()))
    names = sorted({q["ns"] for q in sim.qs})
    for label, part in (("first half", set(names[: len(names) // 2])), ("second half", set(names[len(names) // 2 :]))):
        print(f"\n{label}: {len(part)} conversations\n")
        print("| step | all | " + " | ".join(CATEGORIES.values()) + " |")
        print("|---|---|" + "---|" * len(CATEGORIES))
        sim.report("served list (server defaults)", lambda q: q["top10"], part)
        for m, width, w in itertools.product((1, 2, 3), (1, 2, 3, 5), (0.05, 0.1, 0.15, 0.2)):
            sim.report(
                f"session window m={m} W={width} w={w}", lambda q, m=m, x=width, w=w: sim.window(q, m, x, w), part
            )
        for n, width, w in itertools.product((20, 30), (3, 5), (0.1, 0.15, 0.2)):
            sim.report(
                f"session window over the best {n} W={width} w={w}",
                lambda q, n=n, x=width, w=w: sim.window_served(q, n, x, w),
                part,
            )


def simulate(path: Path) -> None:
    sim = Sim(pickle.loads(path.read_bytes()))
    print("| step | all | " + " | ".join(CATEGORIES.values()) + " |")
    print("|---|---|" + "---|" * len(CATEGORIES))
    sim.report("served list (server defaults)", lambda q: q["top10"])
    sim.report("limit-100 list, its top 10", lambda q: [h[0] for h in q["hits"]])
    for m, w in itertools.product((1, 3, 5), (0.2, 0.4, 0.7)):
        sim.report(f"dense PRF rerank m={m} w={w}", lambda q, m=m, w=w: sim.rerank(q, m, w))
    for m, w, beta in itertools.product((3, 5), (0.3, 0.5), (0.5, 1.0)):
        sim.report(f"dense PRF expand m={m} w={w} beta={beta}", lambda q, m=m, w=w, b=beta: sim.expand(q, m, w, b))
    for m, n, w in itertools.product((3, 5), (5, 10), (0.15, 0.3)):
        sim.report(f"RM3 m={m} terms={n} w={w}", lambda q, m=m, n=n, w=w: sim.rm3(q, m, n, w))
    for m, width, w in itertools.product((1, 2, 3), (2, 3, 5), (0.15, 0.3)):
        sim.report(f"session window m={m} W={width} w={w}", lambda q, m=m, x=width, w=w: sim.window(q, m, x, w))
    for per in (2, 3, 4):
        sim.report(f"session diversity per={per}", lambda q, per=per: sim.diversify(q, per))
    for lam, depth in itertools.product((0.95, 0.9, 0.8, 0.7), (20, 30)):
        sim.report(f"MMR lam={lam} depth={depth}", lambda q, lam=lam, d=depth: sim.mmr(q, lam, d))
    for seeds, links, added in itertools.product((1, 3), (10, 30, 50), (1, 3)):
        sim.report(
            f"entity hop seeds={seeds} max_links={links} added={added}",
            lambda q, s=seeds, x=links, a=added: sim.hop(q, s, x, a, 0.85),
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("dump", "simulate", "halves", "context"))
    parser.add_argument("path", type=Path)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=10)
    args = parser.parse_args()
    if args.mode == "dump":
        asyncio.run(dump(args.path, json.loads(args.data.read_text())[: args.conversations]))
    elif args.mode == "context":
        context(args.path)
    elif args.mode == "halves":
        halves(args.path)
    else:
        simulate(args.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
