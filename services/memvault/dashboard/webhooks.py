"""The webhooks pages (/dashboard/webhooks): the tenant's endpoints with how each last delivery
went, subscribing one (its signing secret shown once, as the keys page shows a key), changing,
rotating and deleting it, and each endpoint's deliveries log with replay. Every act is the REST
API's own facade call (webhooks/service.py), which decides who may: admins, within their
namespaces, as for API keys; other roles get no menu entry and a 403 page, as on the keys page.

A new secret is in the answer to the form's post only, never in a URL or a later page, and every
page is sent `Cache-Control: no-store` (PAGE_HEADERS)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from starlette.responses import Response

from memvault.api import NamespaceAPI
from memvault.dashboard.inputs import names, validated, whole_number
from memvault.dashboard.render import dash
from memvault.dashboard.session import Form, Me, MemberForm, see_other
from memvault.errors import InvalidInput, MemvaultError
from memvault.gateway.deps import Api
from memvault.webhooks.schemas import (
    DEFAULT_GRACE_S,
    EVENT_TYPES,
    WebhookCreated,
    WebhookIn,
    WebhookOut,
    WebhookPatch,
    WebhookReplayIn,
    WebhookRotateIn,
)
from memvault.websessions.service import SignedIn

router = APIRouter(include_in_schema=False)

PATH = "/dashboard/webhooks"
PAGE_SIZE = 50
# One line on each event type beside its checkbox (docs/webhooks.md#events has the whole story).
EVENT_HELP = {
    "memory.created": "a memory is stored",
    "memory.updated": "a memory is changed, promoted or has duplicates merged into it",
    "memory.superseded": "a keyed write or a merge replaced a memory",
    "memory.archived": "a memory is archived (by hand, decay or a resolved contradiction)",
    "memory.deleted": "a memory is deleted (its id only)",
    "forget.completed": "a forget finished (counts only)",
    "events.extracted": "extraction from a conversation finished",
    "job.succeeded": "a background job succeeded",
    "job.failed": "a background job failed",
    "quota.warning": "80 % or 100 % of a quota used",
    "webhook.disabled": "another endpoint was disabled (410, or 3 days failing)",
}
assert set(EVENT_HELP) == set(EVENT_TYPES)
# How long the old secret keeps signing after a rotation: the choices the form offers.
GRACES = ((0, "stops at once"), (3600, "1 hour"), (DEFAULT_GRACE_S, "1 day"), (7 * 86_400, "7 days"))
# What the last form did, by the code the redirect carries: our own words, never the request's.
NOTICES = {
    "saved": "Saved.",
    "deleted": "The endpoint is deleted with its deliveries log; nothing more is sent to it.",
}


def _endpoint_path(endpoint_id: uuid.UUID) -> str:
    return f"{PATH}/{endpoint_id}"


def _namespaces_text(namespaces: list[str] | None) -> str:
    return ", ".join(namespaces) if namespaces else ""


def _entered(form: Form | None, me: SignedIn) -> dict[str, Any]:
    """The create form's values: what was posted, or the defaults (a namespace-limited admin's own
    namespaces, since an endpoint can reach no further)."""
    if form is None:
        mine = me.principal.namespaces
        return {
            "url": "",
            "events": ["memory.created"],
            "namespaces": ", ".join(sorted(mine)) if mine is not None else "",
            "description": "",
        }
    return {
        "url": form.get("url"),
        "events": form.all("events"),
        "namespaces": _namespaces_text(names(form.all("namespaces"))),
        "description": form.get("description"),
    }


def _shown(me: SignedIn, **context: Any) -> dict[str, Any]:
    """What every webhooks page's forms need."""
    p = me.principal
    return {
        "event_types": [(e, EVENT_HELP[e]) for e in EVENT_TYPES],
        "limited_to": sorted(p.namespaces) if p.namespaces is not None else None,
        "graces": GRACES,
        "default_grace": DEFAULT_GRACE_S,
        "now": datetime.now(UTC),
        **context,
    }


async def _list_page(
    request: Request,
    api: NamespaceAPI,
    me: SignedIn,
    *,
    cursor: str | None = None,
    form: Form | None = None,
    error: str | None = None,
    status_code: int = 200,
) -> Response:
    listing = await api.list_webhook_summaries(me.principal, cursor=cursor)
    return dash(
        request,
        me,
        "webhooks.html",
        active="webhooks",
        title="Webhooks",
        notice=NOTICES.get(request.query_params.get("done", "")),
        status_code=status_code,
        **_shown(
            me,
            endpoints=listing.data,
            next_cursor=listing.next_cursor,
            paged=cursor is not None,
            entered=_entered(form, me),
            error=error,
        ),
    )


def _secret(request: Request, me: SignedIn, endpoint: WebhookCreated, *, rotated: bool) -> Response:
    return dash(
        request,
        me,
        "webhook_secret.html",
        active="webhooks",
        title="New signing secret" if rotated else "Webhook endpoint created",
        endpoint=endpoint,
        rotated=rotated,
    )


def _since_default() -> str:
    """The replay form's starting value: an hour ago, as a datetime-local field shows UTC."""
    return (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")


def _since(value: str) -> datetime:
    """A replay's ``since``: an ISO time; one without a zone (a datetime-local field's) is UTC."""
    try:
        at = datetime.fromisoformat(value.strip())
    except ValueError as exc:
        raise InvalidInput("since: enter a date and time, such as 2026-12-04T09:30", extra={"field": "since"}) from exc
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


async def _endpoint_page(
    request: Request,
    api: NamespaceAPI,
    me: SignedIn,
    endpoint_id: uuid.UUID,
    *,
    replay_error: str | None = None,
    since: str | None = None,
    status_code: int = 200,
) -> Response:
    endpoint = await api.get_webhook(me.principal, endpoint_id)
    cursor = request.query_params.get("cursor") or None
    log = await api.webhook_deliveries(me.principal, endpoint_id, limit=PAGE_SIZE, cursor=cursor)
    done = request.query_params.get("done", "")
    notice = NOTICES.get(done)
    count = request.query_params.get("requeued", "")
    if done == "replayed" and count.isascii() and count.isdigit():
        # The count travels as digits and is shown as a number: never the request's text.
        n = int(count)
        notice = f"{n} event{'' if n == 1 else 's'} queued to be sent again."
    next_url = None
    if log.next_cursor:
        next_url = f"{_endpoint_path(endpoint_id)}?{urlencode({'cursor': log.next_cursor})}"
    return dash(
        request,
        me,
        "webhook.html",
        active="webhooks",
        title=f"Webhook {endpoint.url}",
        notice=notice,
        status_code=status_code,
        **_shown(
            me,
            endpoint=endpoint,
            deliveries=log.data,
            paged=cursor is not None,
            next_url=next_url,
            replay_error=replay_error,
            since=since if since is not None else _since_default(),
        ),
    )


def _edit_page(
    request: Request,
    me: SignedIn,
    endpoint: WebhookOut,
    *,
    form: Form | None = None,
    error: str | None = None,
    status_code: int = 200,
) -> Response:
    if form is None:
        entered = {
            "events": endpoint.events,
            "namespaces": _namespaces_text(endpoint.namespaces),
            "description": endpoint.description,
            "enabled": endpoint.enabled,
        }
    else:
        entered = {
            "events": form.all("events"),
            "namespaces": _namespaces_text(names(form.all("namespaces"))),
            "description": form.get("description"),
            "enabled": "enabled" in form,
        }
    return dash(
        request,
        me,
        "webhook_edit.html",
        active="webhooks",
        title="Change a webhook endpoint",
        status_code=status_code,
        **_shown(me, endpoint=endpoint, entered=entered, error=error),
    )


def _refused_form(exc: MemvaultError) -> bool:
    """A refusal to show beside the form that was posted (a 4xx but not a missing endpoint,
    which is the page's own 404)."""
    return 400 <= exc.status < 500 and exc.status != 404


@router.get(PATH)
async def webhooks_page(request: Request, api: Api, me: Me) -> Response:
    return await _list_page(request, api, me, cursor=request.query_params.get("cursor") or None)


@router.post(PATH)
async def create_webhook(request: Request, api: Api, me: Me, form: MemberForm) -> Response:
    try:
        body = validated(
            WebhookIn,
            url=form.get("url").strip(),
            events=form.all("events"),
            namespaces=names(form.all("namespaces")),
            description=form.get("description").strip(),
        )
        created = await api.create_webhook(me.principal, body)
    except MemvaultError as exc:
        if not _refused_form(exc):
            raise
        # Shown beside the form, with what was typed, so it can be corrected.
        return await _list_page(request, api, me, form=form, error=exc.detail, status_code=exc.status)
    return _secret(request, me, created, rotated=False)


@router.get(PATH + "/{endpoint_id}")
async def webhook_page(request: Request, endpoint_id: uuid.UUID, api: Api, me: Me) -> Response:
    return await _endpoint_page(request, api, me, endpoint_id)


@router.get(PATH + "/{endpoint_id}/edit")
async def edit_page(request: Request, endpoint_id: uuid.UUID, api: Api, me: Me) -> Response:
    return _edit_page(request, me, await api.get_webhook(me.principal, endpoint_id))


@router.post(PATH + "/{endpoint_id}/edit")
async def edit_webhook(request: Request, endpoint_id: uuid.UUID, api: Api, me: Me, form: MemberForm) -> Response:
    endpoint = await api.get_webhook(me.principal, endpoint_id)
    fields: dict[str, Any] = {
        "events": form.all("events"),
        "namespaces": names(form.all("namespaces")),
        "description": form.get("description").strip(),
    }
    enabled = "enabled" in form
    # Only a change of state is sent: enabling clears `failing_since`, so re-saving an enabled
    # endpoint's form would otherwise restart the clock that disables one failing for 3 days.
    if enabled != endpoint.enabled:
        fields["enabled"] = enabled
    try:
        await api.update_webhook(me.principal, endpoint_id, validated(WebhookPatch, **fields))
    except MemvaultError as exc:
        if not _refused_form(exc):
            raise
        return _edit_page(request, me, endpoint, form=form, error=exc.detail, status_code=exc.status)
    return see_other(_endpoint_path(endpoint_id), done="saved")


@router.post(PATH + "/{endpoint_id}/rotate")
async def rotate_secret(request: Request, endpoint_id: uuid.UUID, api: Api, me: Me, form: MemberForm) -> Response:
    grace = whole_number(form.get("grace_seconds"), "grace_seconds")
    body = validated(WebhookRotateIn, **({} if grace is None else {"grace_seconds": grace}))
    rotated = await api.rotate_webhook_secret(me.principal, endpoint_id, body)
    return _secret(request, me, rotated, rotated=True)


@router.get(PATH + "/{endpoint_id}/delete")
async def delete_page(request: Request, endpoint_id: uuid.UUID, api: Api, me: Me) -> Response:
    endpoint = await api.get_webhook(me.principal, endpoint_id)
    return dash(
        request, me, "webhook_delete.html", active="webhooks", title="Delete a webhook endpoint", endpoint=endpoint
    )


@router.post(PATH + "/{endpoint_id}/delete")
async def delete_webhook(endpoint_id: uuid.UUID, api: Api, me: Me, form: MemberForm) -> Response:
    await api.delete_webhook(me.principal, endpoint_id)
    return see_other(PATH, done="deleted")


@router.post(PATH + "/{endpoint_id}/replay")
async def replay(request: Request, endpoint_id: uuid.UUID, api: Api, me: Me, form: MemberForm) -> Response:
    try:
        body = validated(WebhookReplayIn, since=_since(form.get("since")))
        done = await api.replay_webhook(me.principal, endpoint_id, body)
    except MemvaultError as exc:
        if not _refused_form(exc):
            raise
        return await _endpoint_page(
            request, api, me, endpoint_id, replay_error=exc.detail, since=form.get("since"), status_code=exc.status
        )
    return see_other(_endpoint_path(endpoint_id), done="replayed", requeued=str(done.requeued))
