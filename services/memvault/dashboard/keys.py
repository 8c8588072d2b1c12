"""The API keys page (/dashboard/keys): the tenant's keys, and creating, rotating and revoking
them through the facade (keys/service.py), which decides who may (admins, within their namespaces).

A new secret is in the answer to the form's post only, never in a URL (a redirect would put it in
the history and the server logs) and never in a later page; PAGE_HEADERS send every page with
`Cache-Control: no-store`, so the back button does not bring it back from a cache either."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from memvault.api import NamespaceAPI
from memvault.dashboard.inputs import names, validated, whole_number
from memvault.dashboard.render import dash
from memvault.dashboard.session import Form, Me, MemberForm, see_other
from memvault.errors import MemvaultError
from memvault.gateway.deps import Api
from memvault.keys.schemas import MAX_KEY_DAYS, KeyCreated, KeyIn, KeyRotateIn
from memvault.principal import SCOPES
from memvault.websessions.service import SignedIn

router = APIRouter(include_in_schema=False)

PATH = "/dashboard/keys"
# What the last form did, by the code the redirect carries: our own words, never the request's.
NOTICES = {"revoked": "The key is revoked: requests with it are refused from now on."}


def _entered(form: Form | None, me: SignedIn) -> dict[str, Any]:
    """The create form's values: what was posted, or the defaults (a namespace-limited admin's
    own namespaces, since a key can reach no further)."""
    if form is None:
        mine = me.principal.namespaces
        return {
            "name": "",
            "scopes": ["read", "write"],
            "namespaces": ", ".join(sorted(mine)) if mine is not None else "",
            "expires_in_days": "",
        }
    return {
        "name": form.get("name"),
        "scopes": form.all("scopes"),
        "namespaces": ", ".join(names(form.all("namespaces")) or []),
        "expires_in_days": form.get("expires_in_days"),
    }


async def _page(
    request: Request,
    api: NamespaceAPI,
    me: SignedIn,
    *,
    cursor: str | None = None,
    form: Form | None = None,
    error: str | None = None,
    status_code: int = 200,
) -> Response:
    listing = await api.list_keys(me.principal, cursor=cursor)
    return dash(
        request,
        me,
        "keys.html",
        active="keys",
        title="API keys",
        notice=NOTICES.get(request.query_params.get("done", "")),
        status_code=status_code,
        keys=listing.data,
        next_cursor=listing.next_cursor,
        paged=cursor is not None,
        entered=_entered(form, me),
        error=error,
        scopes=SCOPES,
        limited_to=sorted(me.principal.namespaces) if me.principal.namespaces is not None else None,
        max_days=MAX_KEY_DAYS,
        now=datetime.now(UTC),
    )


def _secret(request: Request, me: SignedIn, key: KeyCreated, *, rotated: bool) -> Response:
    return dash(
        request,
        me,
        "key_secret.html",
        active="keys",
        title="Secret replaced" if rotated else "API key created",
        key=key,
        rotated=rotated,
    )


@router.get(PATH)
async def keys_page(request: Request, api: Api, me: Me) -> Response:
    return await _page(request, api, me, cursor=request.query_params.get("cursor") or None)


@router.post(PATH)
async def create_key(request: Request, api: Api, me: Me, form: MemberForm) -> Response:
    try:
        body = validated(
            KeyIn,
            name=form.get("name").strip(),
            scopes=form.all("scopes"),
            namespaces=names(form.all("namespaces")),
            expires_in_days=whole_number(form.get("expires_in_days"), "expires_in_days"),
        )
        created = await api.create_key(me.principal, body)
    except MemvaultError as exc:
        if not 400 <= exc.status < 500:
            raise
        # Shown beside the form, with what was typed, so it can be corrected.
        return await _page(request, api, me, form=form, error=exc.detail, status_code=exc.status)
    return _secret(request, me, created, rotated=False)


@router.post(PATH + "/{key_id}/rotate")
async def rotate_key(request: Request, key_id: uuid.UUID, api: Api, me: Me, form: MemberForm) -> Response:
    rotated = await api.rotate_key(me.principal, key_id, KeyRotateIn())
    return _secret(request, me, rotated, rotated=True)


@router.post(PATH + "/{key_id}/revoke")
async def revoke_key(key_id: uuid.UUID, api: Api, me: Me, form: MemberForm) -> Response:
    await api.revoke_key(me.principal, key_id)
    return see_other(PATH, done="revoked")
