"""Charts drawn on the server as SVG, so a page shows them without a script.

A chart is a bar per day, stacked by series (a door, a namespace, a key...). Colours come from
the classes ``series-0`` .. ``series-7`` in dashboard.css: the Content-Security-Policy forbids
inline styles, and a class keeps the legend and the bars the same colour. Every text that reaches
the markup (series names are user text: namespace names, key names) is escaped here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from markupsafe import Markup, escape

# Eight colours; past seven series the smallest are summed as one "other" series.
PALETTE = 8
OTHER = "other"

# The drawing's own units; the SVG scales to its container's width (svg.chart in dashboard.css).
WIDTH = 600
HEIGHT = 240
LEFT = 50  # room for the y-axis figures
RIGHT = 8
TOP = 10
BOTTOM = 30  # room for the day labels


@dataclass(frozen=True)
class Series:
    """One stacked series: its name and a value for each day of the chart."""

    name: str
    values: Sequence[int]

    @property
    def total(self) -> int:
        return sum(self.values)


def compact(n: float) -> str:
    """A figure as people read it on an axis: 950, 1.2k, 3.4M."""
    for size, suffix in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if abs(n) >= size:
            text = f"{n / size:.1f}".removesuffix(".0")
            return f"{text}{suffix}"
    return f"{n:.0f}"


def _day(d: date) -> str:
    return d.strftime("%-d %b")


def capped(series: Sequence[Series], keep: int = PALETTE) -> list[Series]:
    """At most ``keep`` series: the largest ``keep - 1`` and one "other" holding the rest."""
    if len(series) <= keep:
        return list(series)
    ranked = sorted(series, key=lambda s: s.total, reverse=True)
    head, tail = ranked[: keep - 1], ranked[keep - 1 :]
    days = len(tail[0].values)
    rest = [sum(s.values[i] for s in tail) for i in range(days)]
    return [*head, Series(f"{OTHER} ({len(tail)})", rest)]


def _scale_top(peak: int) -> int:
    """The y axis's top: a round figure at or above the highest bar whose half (the middle grid
    line) is a whole figure too: 2, 4, 10, 20, 40, 100..."""
    step = 1
    while True:
        for m in (2, 4, 10):
            if step * m >= peak:
                return step * m
        step *= 10


def _summary(title: str, days: Sequence[date], series: Sequence[Series], unit: str) -> str:
    total = sum(s.total for s in series)
    span = f"{_day(days[0])} to {_day(days[-1])} {days[-1].year}" if days else "no days"
    parts = [f"{title}, {span}: {total:,} {unit}".rstrip()]
    if series:
        parts.append("; ".join(f"{s.name} {s.total:,}" for s in series))
    return ". ".join(parts) + "."


def bar_chart(
    chart_id: str,
    title: str,
    days: Sequence[date],
    series: Sequence[Series],
    *,
    unit: str = "",
) -> Markup:
    """A stacked bar chart, one bar per day. Each bar's part has a <title> (shown on hover and read
    by screen readers); the whole has role="img" and an aria-label summing it up. ``series`` past
    eight are folded into "other" (see ``capped``)."""
    shown = capped([s for s in series if len(s.values) == len(days)])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    totals = [sum(s.values[i] for s in shown) for i in range(len(days))]
    top = _scale_top(max(totals, default=0))
    out = [
        f'<svg class="chart" id="{escape(chart_id)}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'role="img" aria-label="{escape(_summary(title, days, shown, unit))}" '
        'xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    out += _axes(top, plot_w, plot_h)
    if not days or not any(totals):
        out.append(
            f'<text class="chart-empty" x="{LEFT + plot_w / 2:.0f}" y="{TOP + plot_h / 2:.0f}" '
            'text-anchor="middle">No use in this period</text>'
        )
    slot = plot_w / max(len(days), 1)
    bar_w = max(slot * 0.8, 1.0)
    for i, day in enumerate(days):
        x = LEFT + i * slot + (slot - bar_w) / 2
        base: float = TOP + plot_h
        for index, s in enumerate(shown):
            value = s.values[i]
            if value <= 0:
                continue
            h = value / top * plot_h
            base -= h
            label = f"{_day(day)}: {s.name} {value:,} {unit}".rstrip()
            out.append(
                f'<rect class="series-{index % PALETTE}" x="{x:.1f}" y="{base:.1f}" '
                f'width="{bar_w:.1f}" height="{h:.1f}"><title>{escape(label)}</title></rect>'
            )
    out += _day_labels(days, slot)
    out.append("</svg>")
    return Markup("".join(out))


def _axes(top: int, plot_w: float, plot_h: float) -> list[str]:
    parts: list[str] = []
    for fraction in (0.0, 0.5, 1.0):
        y = TOP + plot_h - fraction * plot_h
        parts.append(f'<line class="chart-grid" x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + plot_w:.0f}" y2="{y:.1f}"/>')
        figure = escape(compact(top * fraction))
        parts.append(f'<text class="chart-axis" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{figure}</text>')
    return parts


def _day_labels(days: Sequence[date], slot: float) -> list[str]:
    """The first, middle and last day under the bars: more would overlap on a phone."""
    if not days:
        return []
    picks = sorted({0, len(days) // 2, len(days) - 1})
    anchors = {0: "start", len(days) - 1: "end"}
    y = HEIGHT - 8
    parts = []
    for i in picks:
        x = LEFT + (i + 0.5) * slot if i not in anchors else (LEFT if i == 0 else WIDTH - RIGHT)
        anchor = anchors.get(i, "middle") if len(days) > 1 else "start"
        parts.append(
            f'<text class="chart-axis" x="{x:.1f}" y="{y}" text-anchor="{anchor}">{escape(_day(days[i]))}</text>'
        )
    return parts


def legend(series: Sequence[Series], legend_id: str | None = None) -> Markup:
    """The series' names beside their colours, as an HTML list under the chart (text that wraps
    on a narrow screen, which SVG text does not). Pass the same series as to ``bar_chart``."""
    shown = capped(list(series))
    ident = f' id="{escape(legend_id)}"' if legend_id else ""
    items = "".join(
        f'<li><span class="swatch series-{i % PALETTE}" aria-hidden="true"></span>{escape(s.name)} '
        f'<span class="muted">{s.total:,}</span></li>'
        for i, s in enumerate(shown)
    )
    return Markup(f'<ul class="legend"{ident}>{items}</ul>')
