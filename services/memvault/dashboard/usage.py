"""The usage page (/dashboard/usage) and its CSV twin: what the account used per day, by door,
namespace, key and operation, over the last 7, 30 or 90 days. The figures are the facade's
``account_usage`` series (REST's GET /v1/account/usage), so a namespace-limited member sees only
its namespaces' use here as there."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal, cast

from fastapi import APIRouter, Request
from starlette.responses import Response

from memvault.api import NamespaceAPI
from memvault.dashboard.render import dash
from memvault.dashboard.session import Me
from memvault.gateway.deps import Api
from memvault.metering.schemas import GroupBy, UsageSeriesOut
from memvault.metering.tally import UNITS
from memvault.principal import Principal
from memvault.web.charts import Series, bar_chart, legend
from memvault.web.render import PAGE_HEADERS

router = APIRouter(include_in_schema=False)

PERIODS = (7, 30, 90)
GROUPS: tuple[GroupBy, ...] = ("door", "namespace", "key", "operation")
GroupChoice = GroupBy | Literal["all"]
UNIT_LABELS = {
    "requests": "requests",
    "searches": "searches",
    "memories_written": "memories written",
    "events_ingested": "events ingested",
    "tokens_embedded": "tokens embedded",
    "bytes_stored": "bytes stored",
}
GROUP_LABELS = {"door": "Door", "namespace": "Namespace", "key": "Key", "operation": "Operation"}
# The table lists this many groups per dimension (the largest); the CSV has every row.
TABLE_ROWS = 50
# Keys named on the page: the newest this many (older ones show by id).
KEY_NAMES = 200
# A spreadsheet runs a cell starting with one of these as a formula (CSV injection).
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class Period:
    days: list[date]
    start: datetime
    end: datetime


def period(days: int, now: datetime | None = None) -> Period:
    """The last ``days`` whole UTC days, today included (today so far)."""
    now = now or datetime.now(UTC)
    today = now.date()
    first = today - timedelta(days=days - 1)
    return Period(
        days=[first + timedelta(days=i) for i in range(days)],
        start=datetime(first.year, first.month, first.day, tzinfo=UTC),
        end=now,
    )


def group_name(group_by: str | None, value: str | None, keys: Mapping[str, str] | None = None) -> str:
    """A group as a person reads it: the empty value of a dimension says what it stands for, and
    a key is shown by its name when ``keys`` (id -> name) knows it."""
    if not value:
        return {"namespace": "(no namespace)", "key": "(background jobs)"}.get(group_by or "", "(all)")
    if group_by == "key" and value.startswith("user:"):
        return f"signed-in user {value.removeprefix('user:')}"
    if group_by == "key" and keys and value in keys:
        return f"{keys[value]} ({value[:8]})"
    return value


async def key_names(api: NamespaceAPI, p: Principal) -> dict[str, str]:
    """The names of the keys an admin may see (the newest page of them); others see key ids, as
    the facade shows them no key list."""
    if not p.has("admin"):
        return {}
    keys = await api.list_keys(p, limit=KEY_NAMES)
    return {str(k.id): k.name for k in keys.data}


def series_of(
    usage: UsageSeriesOut, days: Sequence[date], unit: str, keys: Mapping[str, str] | None = None
) -> list[Series]:
    """One chart series per group of ``usage`` (a single one when it is not grouped), a value a day."""
    index = {d: i for i, d in enumerate(days)}
    grid: dict[str, list[int]] = {}
    for point in usage.points:
        i = index.get(point.period.astimezone(UTC).date())
        if i is None:
            continue
        row = grid.setdefault(group_name(usage.group_by, point.group, keys), [0] * len(days))
        row[i] += getattr(point, unit)
    return [Series(name, values) for name, values in grid.items()]


def totals_of(usage: UsageSeriesOut, keys: Mapping[str, str] | None = None) -> list[dict[str, int | str]]:
    """Each group's sum over the period, the most requests first."""
    sums: dict[str, dict[str, int | str]] = {}
    for point in usage.points:
        row = sums.setdefault(
            point.group or "", {"group": group_name(usage.group_by, point.group, keys), **dict.fromkeys(UNITS, 0)}
        )
        for u in UNITS:
            row[u] = cast(int, row[u]) + getattr(point, u)
    return sorted(sums.values(), key=lambda r: (-cast(int, r["requests"]), str(r["group"])))


def _choice(request: Request) -> tuple[int, GroupChoice, str]:
    """The period, group and measure asked for; anything else falls back to the defaults (the
    form offers only these, and a bookmark with a stale value should still open)."""
    q = request.query_params
    days = int(q["days"]) if q.get("days", "").isdigit() and int(q["days"]) in PERIODS else 30
    group = q.get("group", "all")
    chosen: GroupChoice = group if group in GROUPS else "all"
    unit = q.get("unit", "requests")
    return days, chosen, unit if unit in UNITS else "requests"


async def _series(api: NamespaceAPI, p: Principal, span: Period, group: GroupChoice) -> list[UsageSeriesOut]:
    groups = GROUPS if group == "all" else (group,)
    return [await api.account_usage(p, start=span.start, end=span.end, granularity="day", group_by=g) for g in groups]


@router.get("/dashboard/usage")
async def usage_page(request: Request, api: Api, me: Me) -> Response:
    days, group, unit = _choice(request)
    span = period(days)
    charts, tables = [], []
    keys = await key_names(api, me.principal) if group in ("all", "key") else {}
    for usage in await _series(api, me.principal, span, group):
        g = cast(str, usage.group_by)
        series = series_of(usage, span.days, unit, keys)
        title = f"{UNIT_LABELS[unit].capitalize()} per day by {g}"
        charts.append(
            {
                "group": g,
                "label": GROUP_LABELS[g],
                "svg": bar_chart(f"usage-chart-{g}", title, span.days, series, unit=UNIT_LABELS[unit]),
                "legend": legend(series, f"usage-legend-{g}"),
            }
        )
        rows = totals_of(usage, keys)
        tables.append({"group": g, "label": GROUP_LABELS[g], "rows": rows[:TABLE_ROWS], "more": len(rows) - TABLE_ROWS})
    query = {"days": str(days), "group": group, "unit": unit}
    return dash(
        request,
        me,
        "usage.html",
        active="usage",
        title="Usage",
        charts=charts,
        tables=tables,
        days=days,
        periods=PERIODS,
        group=group,
        groups=GROUPS,
        group_labels=GROUP_LABELS,
        unit=unit,
        units=UNITS,
        unit_labels=UNIT_LABELS,
        span=span,
        csv_query=query,
    )


def safe_cell(value: object) -> object:
    """A cell a spreadsheet shows as text: user text (namespace names) starting like a formula
    gets a leading apostrophe (OWASP's advice against CSV injection)."""
    if isinstance(value, str) and value.startswith(_FORMULA):
        return "'" + value
    return value


def usage_csv(series: Sequence[UsageSeriesOut]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(["day", "by", "group", *UNITS])
    for usage in series:
        for point in usage.points:
            writer.writerow(
                [
                    safe_cell(v)
                    for v in (
                        point.period.astimezone(UTC).date().isoformat(),
                        usage.group_by,
                        point.group or "",
                        *(getattr(point, u) for u in UNITS),
                    )
                ]
            )
    return out.getvalue()


@router.get("/dashboard/usage.csv")
async def usage_download(request: Request, api: Api, me: Me) -> Response:
    days, group, _ = _choice(request)
    span = period(days)
    body = usage_csv(await _series(api, me.principal, span, group))
    name = f"memvault-usage-{span.days[0].isoformat()}-{span.days[-1].isoformat()}-{group}.csv"
    headers = {**PAGE_HEADERS, "Content-Disposition": f'attachment; filename="{name}"'}
    return Response(body, media_type="text/csv; charset=utf-8", headers=headers)
