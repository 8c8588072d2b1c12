"""What a plan allows: one typed record of every limit, so a new limit is one field here (plans
store their limits as JSON, a tenant's overrides too; no migration per limit).

None means unlimited. Rates are requests per minute; sizes are bytes; monthly counts reset at the
start of each calendar month (UTC).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from typing import Any, Literal

# The three kinds of request a rate limit tells apart (gateway routes are classified into one).
RequestKind = Literal["read", "write", "search"]
REQUEST_KINDS: tuple[RequestKind, ...] = ("read", "write", "search")


@dataclass(frozen=True)
class PlanLimits:
    # Requests per minute, per API key (or OAuth grant) and per tenant, by kind of request.
    key_reads_per_minute: int | None = None
    key_writes_per_minute: int | None = None
    key_searches_per_minute: int | None = None
    tenant_reads_per_minute: int | None = None
    tenant_writes_per_minute: int | None = None
    tenant_searches_per_minute: int | None = None
    # Requests of one tenant running at once, over every replica.
    concurrent_requests: int | None = None
    # Caps on what a tenant holds (403 quota_exceeded past them).
    memories: int | None = None
    namespaces: int | None = None
    api_keys: int | None = None
    members: int | None = None
    # Webhook endpoints (never more than 20 whatever the plan: each write fans out to every one).
    webhooks: int | None = None
    # Monthly counters (429 quota_exceeded until the month ends).
    events_per_month: int | None = None
    embedded_tokens_per_month: int | None = None
    # One export's or import's size in bytes.
    export_bytes: int | None = None
    import_bytes: int | None = None

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def parse(cls, data: dict[str, Any], *, where: str = "limits") -> PlanLimits:
        """From stored or operator-given JSON: unknown names and non-counts are refused, so a
        misspelt limit never silently means "unlimited"."""
        known = set(cls.names())
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown {where}: {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        for name, value in data.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError(f"{where}.{name} must be a whole number ≥ 0 or null, not {value!r}")
        return cls(**data)

    def with_overrides(self, overrides: dict[str, Any]) -> PlanLimits:
        """A tenant's overrides replace single limits of its plan (null: unlimited for it)."""
        PlanLimits.parse(overrides, where="overrides")
        return PlanLimits(**{**asdict(self), **overrides})

    def as_dict(self) -> dict[str, int | None]:
        return asdict(self)

    def per_minute(self, per: Literal["key", "tenant"], kind: RequestKind) -> int | None:
        plural = {"read": "reads", "write": "writes", "search": "searches"}[kind]
        value: int | None = getattr(self, f"{per}_{plural}_per_minute")
        return value


UNLIMITED = PlanLimits()


def month_bounds(now: datetime | None = None) -> tuple[datetime, datetime]:
    """The calendar month (UTC) that monthly counters count in: [start, end)."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    return start, end
