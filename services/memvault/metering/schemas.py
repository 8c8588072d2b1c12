"""API schemas of the account's plan, quotas and usage."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

Granularity = Literal["hour", "day"]
GroupBy = Literal["door", "namespace", "key", "operation"]


class QuotaOut(BaseModel):
    quota: str = Field(description="The plan limit this use counts against (memories, events_per_month, ...).")
    used: int
    limit: int | None = Field(description="null: unlimited on this plan.")
    resets_at: datetime | None = Field(
        default=None, description="When a monthly counter starts again (the month's end, UTC); null for caps."
    )


class PlanOut(BaseModel):
    name: str
    limits: dict[str, int | None] = Field(
        description="Every limit of the plan with the tenant's overrides; null: unlimited."
    )
    overrides: dict[str, int | None] = Field(default_factory=dict, description="Limits set for this tenant alone.")


class AccountPlanOut(BaseModel):
    """The plan, its limits and the use of each quota."""

    plan: PlanOut
    quotas: list[QuotaOut]


class UsagePoint(BaseModel):
    period: datetime = Field(description="Start of the hour or day (UTC).")
    group: str | None = Field(
        default=None,
        description="The value of `group_by` (door, namespace, key id or operation); '' for none (no namespace).",
    )
    requests: int
    memories_written: int
    searches: int
    events_ingested: int
    tokens_embedded: int
    bytes_stored: int


class UsageSeriesOut(BaseModel):
    start: datetime = Field(description="Inclusive (the `from` asked for, to its hour).")
    end: datetime = Field(description="Exclusive.")
    granularity: Granularity
    group_by: GroupBy | None
    points: list[UsagePoint] = Field(description="Periods with any use, oldest first; periods with none are left out.")
