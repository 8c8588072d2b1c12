"""What the status routes and page show: the service's state, never a tenant's."""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

from pydantic import BaseModel, Field

State = Literal["operational", "degraded", "down"]


class ComponentOut(BaseModel):
    name: str = Field(description="Stable identifier: api, database, redis (or jobs), workers, embedding_model.")
    label: str = Field(description="What the status page calls it.")
    state: State
    detail: str = Field(description="One line for a person: the model's name, how many workers, why degraded.")
    workers: int | None = Field(default=None, description="workers only: RQ workers registered, or job threads.")
    queued: int | None = Field(default=None, description="workers only: jobs waiting to run, all tenants together.")


class DayOut(BaseModel):
    day: date
    samples: int = Field(description="Minutes sampled that day (1440 at most); 0: no data.")
    degraded: int
    down: int
    uptime: float | None = Field(description="Share of the sampled minutes that were operational; null: no data.")


class PeriodOut(BaseModel):
    start: datetime = Field(description="The first minute sampled not operational.")
    end: datetime = Field(description="The last one (inclusive: the period lasted until a minute after).")
    minutes: int
    state: State = Field(description="The worst state sampled in the period.")
    components: list[str] = Field(description="Components that were not operational during it.")


class HistoryOut(BaseModel):
    since: date
    days: list[DayOut] = Field(description="One per UTC day, oldest first, today last.")
    degraded_periods: list[PeriodOut] = Field(description="Newest first, at most 50.")


class LatencyOut(BaseModel):
    door: Literal["rest", "sdk", "mcp"]
    kind: Literal["search", "write"]
    window: Literal["hour", "day"]
    calls: int
    p50_ms: float | None = Field(description="Upper bound of the histogram bucket: at most 25 % above the truth.")
    p95_ms: float | None
