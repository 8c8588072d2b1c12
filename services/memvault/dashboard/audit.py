"""The audit log page (/dashboard/audit): every change in the tenant, who made it and when,
filtered by GET fields so a filtered view is a link one can share. Admin only, as the facade's
list_audit decides (a viewer or member gets its 403 as a page)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from memvault.audit.schemas import AuditEntryOut
from memvault.dashboard.render import dash
from memvault.dashboard.session import Me
from memvault.errors import InvalidInput
from memvault.gateway.deps import Api

router = APIRouter(include_in_schema=False)

PAGE_SIZE = 50
# The things entries are about: offered as suggestions in the action field (a prefix matches all
# of its actions, e.g. `key` finds key.create, key.rotate and key.revoke).
ACTIONS = (
    "memory",
    "events.ingest",
    "entity",
    "relation",
    "namespace",
    "key",
    "member",
    "user",
    "oauth.revoke",
    "job.cancel",
    "trace",
    "contradiction",
)
# Actions whose target is a job: the entry links to it.
JOB_TARGETS = frozenset({"job.cancel", "events.ingest", "namespace.organize"})
LIMITS = {"action": 100, "actor": 254, "target": 200}


def _text(name: str, value: str) -> str | None:
    value = value.strip()
    if len(value) > LIMITS[name]:
        raise InvalidInput(f"The {name} filter is too long.", extra={"field": name})
    if "\x00" in value:
        raise InvalidInput(f"The {name} filter cannot contain NUL characters.", extra={"field": name})
    return value or None


def _day(name: str, value: str) -> date | None:
    if not value.strip():
        return None
    try:
        return date.fromisoformat(value.strip())
    except ValueError as exc:
        raise InvalidInput(f"The {name} date must look like 2026-12-31.", extra={"field": name}) from exc


def _row(entry: AuditEntryOut) -> dict[str, Any]:
    return {
        "entry": entry,
        "detail": json.dumps(entry.detail, indent=2, sort_keys=True, ensure_ascii=False) if entry.detail else "",
        "job_link": entry.action in JOB_TARGETS and entry.target_id is not None,
    }


@router.get("/dashboard/audit")
async def audit_page(
    request: Request,
    api: Api,
    me: Me,
    action: str = "",
    actor: str = "",
    target: str = "",
    since: Annotated[str, Query(alias="from")] = "",
    to: str = "",
    cursor: str = "",
) -> Response:
    filters = {"action": _text("action", action), "actor": _text("actor", actor), "target": _text("target", target)}
    first, last = _day("from", since), _day("to", to)
    found = await api.list_audit(
        me.principal,
        action=filters["action"],
        actor=filters["actor"],
        target_id=filters["target"],
        # Whole days in UTC, the `to` day included.
        since=datetime.combine(first, time.min, UTC) if first else None,
        until=datetime.combine(last + timedelta(days=1), time.min, UTC) if last else None,
        limit=PAGE_SIZE,
        cursor=cursor.strip() or None,
    )
    shown = {**{k: v or "" for k, v in filters.items()}, "from": since.strip(), "to": to.strip()}
    query = {k: v for k, v in shown.items() if v}
    first_url = "/dashboard/audit" + (f"?{urlencode(query)}" if query else "")
    next_url = None
    if found.next_cursor:
        next_url = "/dashboard/audit?" + urlencode({**query, "cursor": found.next_cursor})
    return dash(
        request,
        me,
        "audit.html",
        active="audit",
        title="Audit log",
        rows=[_row(e) for e in found.data],
        filters=shown,
        filtered=any(shown.values()),
        actions=ACTIONS,
        first_url=first_url if cursor else None,
        next_url=next_url,
    )
