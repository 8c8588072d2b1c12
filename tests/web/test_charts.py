"""The server-drawn SVG charts: a bar per day stacked by series, accessible, coloured by class
only (the CSP forbids inline styles), and every label escaped (series names are user text)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import date, timedelta

from markupsafe import Markup

from memvault.web.charts import Series, bar_chart, compact, legend

SVG = "{http://www.w3.org/2000/svg}"
DAYS = [date(2026, 11, 1) + timedelta(days=i) for i in range(5)]


def parse(markup: Markup) -> ET.Element:
    return ET.fromstring(str(markup))


def test_a_bar_per_day_stacked_by_series_with_a_title_each() -> None:
    chart = bar_chart("c", "Requests", DAYS, [Series("rest", [1, 0, 3, 0, 2]), Series("mcp", [1, 1, 0, 0, 0])])
    root = parse(chart)
    rects = root.findall(f"{SVG}rect")
    # One part per non-zero value; a day with nothing draws nothing.
    assert len(rects) == 5
    titles = [r.find(f"{SVG}title").text for r in rects]  # type: ignore[union-attr]
    assert "1 Nov: rest 1" in titles and "2 Nov: mcp 1" in titles and "3 Nov: rest 3" in titles
    assert {r.get("class") for r in rects} == {"series-0", "series-1"}
    # Stacked: the 1 Nov bar's two parts have the same height and touch.
    first = [r for r in rects if r.find(f"{SVG}title").text.startswith("1 Nov")]  # type: ignore[union-attr]
    a, b = sorted(first, key=lambda r: float(r.get("y", 0)))
    assert a.get("height") == b.get("height")
    assert abs(float(a.get("y", 0)) + float(a.get("height", 0)) - float(b.get("y", 0))) < 0.2


def test_the_tallest_bar_fits_under_a_round_axis_top() -> None:
    root = parse(bar_chart("c", "Searches", DAYS, [Series("all", [0, 0, 37, 0, 0])]))
    labels = [t.text for t in root.findall(f"{SVG}text")]
    assert "40" in labels and "20" in labels and "0" in labels and "1 Nov" in labels and "5 Nov" in labels


def test_accessible_name_and_role() -> None:
    chart = bar_chart("chart-x", "Requests per day", DAYS, [Series("rest", [1, 2, 3, 4, 5]), Series("sdk", [1] * 5)])
    root = parse(chart)
    assert root.get("role") == "img" and root.get("id") == "chart-x"
    label = root.get("aria-label", "")
    assert label.startswith("Requests per day, 1 Nov to 5 Nov 2026: 20") and "rest 15" in label and "sdk 5" in label
    assert root.find(f"{SVG}title").text == "Requests per day"  # type: ignore[union-attr]


def test_names_are_escaped_everywhere() -> None:
    evil = '<script>alert(1)</script>" onload="x'
    chart = bar_chart("c", "T <b>", DAYS, [Series(evil, [1, 1, 1, 1, 1])], unit="<u>")
    text = str(chart) + str(legend([Series(evil, [1] * 5)]))
    assert "<script>" not in text and '" onload="' not in text and "<b>" not in text and "<u>" not in text
    assert "&lt;script&gt;" in text
    # Still well-formed: nothing broke out of its attribute or element.
    parse(chart)


def test_colours_come_from_classes_never_inline_styles() -> None:
    chart = bar_chart("c", "T", DAYS, [Series(f"s{i}", [i + 1] * 5) for i in range(3)])
    assert "style=" not in str(chart) and "fill=" not in str(chart)
    assert 'class="swatch series-2"' in str(legend([Series(f"s{i}", [1] * 5) for i in range(3)]))


def test_past_eight_series_the_smallest_are_one_other() -> None:
    many = [Series(f"ns{i}", [i] * 5) for i in range(1, 12)]
    root = parse(bar_chart("c", "T", DAYS, many))
    classes = {r.get("class") for r in root.findall(f"{SVG}rect")}
    assert classes == {f"series-{i}" for i in range(8)}
    assert "other (4)" in root.get("aria-label", "")
    items = re.findall(r"<li>", str(legend(many)))
    assert len(items) == 8


def test_an_empty_period_says_so() -> None:
    root = parse(bar_chart("c", "T", DAYS, []))
    assert root.findall(f"{SVG}rect") == []
    assert any(t.text == "No use in this period" for t in root.findall(f"{SVG}text"))


def test_the_middle_line_is_a_whole_figure() -> None:
    for peak in (0, 1, 3, 5, 7, 33, 999, 12_345):
        labels = [
            t.text for t in parse(bar_chart("c", "T", DAYS, [Series("a", [peak, 0, 0, 0, 0])])).findall(f"{SVG}text")
        ]
        assert all(label and "." not in label for label in labels[:3] if label[0].isdigit()), labels


def test_compact_figures() -> None:
    assert [compact(n) for n in (0, 950, 1000, 1250, 2_000_000, 3_400_000_000)] == [
        "0",
        "950",
        "1k",
        "1.2k",
        "2M",
        "3.4G",
    ]
