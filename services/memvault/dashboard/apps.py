"""The connected apps page (/dashboard/apps): the OAuth grants members gave MCP clients (which
client, where it sends sign-ins, when, last use, what it may reach) and revoking one, through the
facade (oauth/accounts.py list_grants, revoke_grant): admins only, within their namespaces."""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

from fastapi import APIRouter, Request
from starlette.responses import Response

from memvault.dashboard.render import dash
from memvault.dashboard.session import Me, MemberForm, see_other
from memvault.gateway.deps import Api

router = APIRouter(include_in_schema=False)

PATH = "/dashboard/apps"
NOTICES = {"revoked": "Access revoked: the app's tokens stop working on its next request."}


def hosts(redirect_uris: list[str]) -> list[str]:
    """Where a client sends its sign-ins, as hosts (a redirect URI's path tells a person little)."""
    found = [urlsplit(uri).netloc or uri for uri in redirect_uris]
    return list(dict.fromkeys(found))


@router.get(PATH)
async def apps_page(request: Request, api: Api, me: Me) -> Response:
    cursor = request.query_params.get("cursor") or None
    everything = request.query_params.get("show") == "all"
    listing = await api.list_grants(me.principal, live=not everything, cursor=cursor)
    return dash(
        request,
        me,
        "apps.html",
        active="apps",
        title="Connected apps",
        notice=NOTICES.get(request.query_params.get("done", "")),
        grants=[(g, hosts(g.redirect_uris)) for g in listing.data],
        next_cursor=listing.next_cursor,
        paged=cursor is not None,
        everything=everything,
    )


@router.post(PATH + "/{grant_id}/revoke")
async def revoke_app(grant_id: uuid.UUID, api: Api, me: Me, form: MemberForm) -> Response:
    await api.revoke_grant(me.principal, grant_id)
    return see_other(PATH, done="revoked")
