"""The overview page (/dashboard): the plan and each quota's use, the last 30 days of usage as
charts, and how to connect: the MCP URL with each client's set-up (mcp/setup.py, the same text
`memvault mcp setup` and docs/mcp.md give) and the REST base URL.

Every member may open it (read scope). ``account_plan`` already decides what a member is shown:
one limited to some namespaces gets the plan without the tenant-wide quota counts, which would
tell it about namespaces it cannot reach; the page says so instead of asking for more.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from memvault.dashboard.render import dash
from memvault.dashboard.session import Me
from memvault.dashboard.usage import period, series_of
from memvault.gateway.deps import Api
from memvault.mcp import setup
from memvault.metering.schemas import QuotaOut
from memvault.web.charts import bar_chart, legend

router = APIRouter(include_in_schema=False)

DAYS = 30
QUOTA_LABELS = {
    "memories": "Stored memories",
    "namespaces": "Namespaces",
    "api_keys": "API keys",
    "members": "Members",
    "events_per_month": "Events this month",
    "embedded_tokens_per_month": "Embedded tokens this month",
}
# (element id, unit of the series, title): each chart stacks the unit by door.
CHARTS = (
    ("chart-requests", "requests", "Requests per day by door"),
    ("chart-searches", "searches", "Searches per day"),
    ("chart-writes", "memories_written", "Memories written per day"),
    ("chart-bytes", "bytes_stored", "Bytes stored per day"),
)


def base_url(request: Request) -> str:
    """The address clients use: MEMVAULT_PUBLIC_URL when set (behind a proxy), else the one this
    page was opened at."""
    public = request.app.state.settings.public_url
    return (public or str(request.base_url)).rstrip("/")


def quota_view(q: QuotaOut) -> dict[str, object]:
    share = None if not q.limit else min(q.used / q.limit, 1.0)
    return {
        "name": q.quota,
        "label": QUOTA_LABELS.get(q.quota, q.quota.replace("_", " ").capitalize()),
        "used": q.used,
        "limit": q.limit,
        "share": share,
        # The page warns from 80 %: time to raise the plan before a write is refused.
        "level": "full" if share is not None and share >= 1 else "high" if share is not None and share >= 0.8 else "ok",
        "resets_at": q.resets_at,
    }


@router.get("/dashboard")
async def overview(request: Request, api: Api, me: Me) -> Response:
    p = me.principal
    account = await api.account_plan(p)
    span = period(DAYS)
    usage = await api.account_usage(p, start=span.start, end=span.end, granularity="day", group_by="door")
    charts = []
    for chart_id, unit, title in CHARTS:
        series = series_of(usage, span.days, unit)
        charts.append(
            {
                "id": chart_id,
                "title": title,
                "svg": bar_chart(chart_id, title, span.days, series, unit=unit.replace("_", " ")),
                "legend": legend(series),
                "total": sum(s.total for s in series),
            }
        )
    base = base_url(request)
    limits = {k: v for k, v in account.plan.limits.items() if k not in QUOTA_LABELS}
    return dash(
        request,
        me,
        "overview.html",
        active="overview",
        title="Overview",
        plan=account.plan,
        limits=limits,
        quotas=[quota_view(q) for q in account.quotas],
        quotas_hidden=not p.unrestricted,
        charts=charts,
        days=DAYS,
        mcp_url=f"{base}/mcp",
        rest_url=f"{base}/v1",
        clients=setup.clients(f"{base}/mcp"),
        rules=setup.block(),
        rule_files=list(setup.TARGETS.values()),
    )
