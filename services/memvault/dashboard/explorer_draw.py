"""The explorer's pictures, drawn on the server as SVG geometry for the templates: each hit's signal
bars, and a memory's entity graph. Pure functions of the facade's answers; no I/O."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass

from memvault.graph.schemas import MemoryGraph
from memvault.retrieval.schemas import SearchOut

BAR_WIDTH = 140  # SVG units of a full bar


@dataclass(frozen=True)
class Bar:
    channel: str
    fraction: float  # 0..1, the bar's length
    width: float  # in SVG units
    rank: int | None
    value: float | None
    weight: float | None
    relative: bool  # scaled to the best hit shown, not a value in 0..1 of its own


def hit_bars(found: SearchOut) -> dict[uuid.UUID, list[Bar]]:
    """Per hit, one bar per channel that took part in its search. A channel whose values lie in
    0..1 (cosine, recency, importance, intent, graph, window, context) is drawn as it is; an
    unbounded one (BM25 text rank, access, strength, a reranker's score) as a share of the best
    value among the hits shown, which is what the page can know of the candidates."""
    channels: dict[str, list[float]] = {}
    for r in found.results:
        for name, sig in r.signals.channels.items():
            channels.setdefault(name, [])
            if sig.value is not None:
                channels[name].append(sig.value)
    scale: dict[str, float | None] = {}
    for name, values in channels.items():
        bounded = all(0.0 <= v <= 1.0 for v in values)
        top = max((abs(v) for v in values), default=0.0)
        scale[name] = None if bounded else (top or 1.0)
    out: dict[uuid.UUID, list[Bar]] = {}
    for r in found.results:
        bars = []
        for name, sig in r.signals.channels.items():
            v = sig.value or 0.0
            divisor = scale[name]
            fraction = min(1.0, max(0.0, v / divisor if divisor else v))
            bars.append(
                Bar(
                    channel=name,
                    fraction=round(fraction, 4),
                    width=round(fraction * BAR_WIDTH, 1),
                    rank=sig.rank,
                    value=sig.value,
                    weight=found.metrics.weights.get(name),
                    relative=divisor is not None,
                )
            )
        out[r.memory.id] = bars
    return out


@dataclass(frozen=True)
class Node:
    id: str
    label: str
    title: str
    kind: str  # memory, entity (linked to the memory), neighbour
    x: float
    y: float


@dataclass(frozen=True)
class Edge:
    x1: float
    y1: float
    x2: float
    y2: float
    label: str
    kind: str  # mention, relation
    lx: float
    ly: float


@dataclass(frozen=True)
class Drawing:
    width: int
    height: int
    nodes: list[Node]
    edges: list[Edge]


def _short(text: str, n: int = 18) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _ring(count: int, radius: float, cx: float, cy: float, turn: float = 0.0) -> list[tuple[float, float]]:
    return [
        (
            round(cx + radius * math.cos(turn + 2 * math.pi * i / count - math.pi / 2), 1),
            round(cy + radius * math.sin(turn + 2 * math.pi * i / count - math.pi / 2), 1),
        )
        for i in range(count)
    ]


def draw_graph(graph: MemoryGraph, *, width: int = 480, height: int = 360) -> Drawing:
    """The memory in the middle, its entities on a ring around it, the entities one relation
    further on an outer ring; mentions and relations as lines, relations labelled by type."""
    cx, cy = width / 2, height / 2
    nodes: dict[uuid.UUID | str, Node] = {"memory": Node("memory", "this memory", "this memory", "memory", cx, cy)}
    inner = _ring(len(graph.entities), min(width, height) * 0.26, cx, cy) if graph.entities else []
    for e, (x, y) in zip(graph.entities, inner, strict=True):
        nodes[e.id] = Node(str(e.id), _short(e.name), f"{e.name} ({e.type})", "entity", x, y)
    outer = (
        _ring(len(graph.neighbours), min(width, height) * 0.44, cx, cy, turn=math.pi / max(6, len(graph.neighbours)))
        if graph.neighbours
        else []
    )
    for e, (x, y) in zip(graph.neighbours, outer, strict=True):
        nodes[e.id] = Node(str(e.id), _short(e.name), f"{e.name} ({e.type})", "neighbour", x, y)
    edges = [
        Edge(cx, cy, n.x, n.y, "mentions", "mention", (cx + n.x) / 2, (cy + n.y) / 2)
        for n in nodes.values()
        if n.kind == "entity"
    ]
    for r in graph.relations:
        a, b = nodes.get(r.source_id), nodes.get(r.target_id)
        if a is None or b is None:
            continue
        edges.append(Edge(a.x, a.y, b.x, b.y, _short(r.type, 16), "relation", (a.x + b.x) / 2, (a.y + b.y) / 2 - 3))
    return Drawing(width=width, height=height, nodes=list(nodes.values()), edges=edges)
