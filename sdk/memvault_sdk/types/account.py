from __future__ import annotations

from datetime import datetime

from memvault_sdk.types._model import Model


class Quota(Model):
    quota: str
    used: int
    # None: unlimited on this plan.
    limit: int | None = None
    # When a monthly counter starts again (the month's end, UTC); None for caps.
    resets_at: datetime | None = None


class Plan(Model):
    name: str
    limits: dict[str, int | None]
    overrides: dict[str, int | None] = {}


class UsagePoint(Model):
    period: datetime
    # The value of group_by for this row ('' for none, e.g. no namespace); None when not grouped.
    group: str | None = None
    requests: int
    memories_written: int
    searches: int
    events_ingested: int
    tokens_embedded: int
    bytes_stored: int


class UsageSeries(Model):
    start: datetime
    end: datetime
    granularity: str
    group_by: str | None = None
    points: list[UsagePoint]
