"""REST: the account's usage series, as JSON or CSV (for invoicing)."""

from __future__ import annotations

import csv
import io
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from memvault.fields import Instant
from memvault.gateway.deps import Api, ReadPrincipal
from memvault.metering.schemas import Granularity, GroupBy, UsageSeriesOut
from memvault.metering.tally import UNITS

router = APIRouter(prefix="/v1", tags=["account"])

CSV = "text/csv"


@router.get(
    "/account/usage",
    response_model=UsageSeriesOut,
    responses={200: {"content": {CSV: {"schema": {"type": "string"}}}, "description": "The series (JSON or CSV)."}},
)
async def account_usage(
    request: Request,
    p: ReadPrincipal,
    api: Api,
    start: Annotated[Instant | None, Query(alias="from", description="Inclusive, with a time zone.")] = None,
    end: Annotated[Instant | None, Query(alias="to", description="Exclusive, with a time zone (default now).")] = None,
    granularity: Granularity = "day",
    group_by: GroupBy | None = None,
) -> UsageSeriesOut | Response:
    """What the account used per hour or day: requests, memories written, searches, events
    ingested, tokens embedded and bytes stored, optionally per door, namespace, key or operation.
    `Accept: text/csv` answers the same rows as CSV. A key limited to some namespaces sees only
    theirs. At most 31 days of hours or 400 days of days per request."""
    series = await api.account_usage(p, start=start, end=end, granularity=granularity, group_by=group_by)
    if CSV not in request.headers.get("accept", ""):
        return series
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["period", *([group_by] if group_by else []), *UNITS])
    for point in series.points:
        writer.writerow(
            [
                point.period.isoformat(),
                *([point.group] if group_by else []),
                *(getattr(point, u) for u in UNITS),
            ]
        )
    return Response(out.getvalue(), media_type=f"{CSV}; charset=utf-8")
