"""The members page (/dashboard/members): the organisation's members and their roles, invitations
by email, changing a role, removing a member. members/service.py and members/rules.py decide who
may do what (owners and admins over the whole organisation; only an owner touches owners; never
the last owner); this page only leaves out the controls they would refuse."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request
from starlette.responses import Response

from memvault.api import NamespaceAPI
from memvault.dashboard.inputs import validated
from memvault.dashboard.render import dash
from memvault.dashboard.session import Form, Me, MemberForm, see_other
from memvault.errors import MemvaultError
from memvault.gateway.deps import Api
from memvault.members.roles import MANAGERS, ROLES
from memvault.members.schemas import InvitationIn, MemberPatch
from memvault.websessions.service import SignedIn

router = APIRouter(include_in_schema=False)

PATH = "/dashboard/members"
NOTICES = {
    "invited": "Invitation sent: the link in the mail works until the date shown below.",
    "role": "Role changed. If it took scopes away, that member's connected apps were signed out.",
    "removed": "Member removed: they can no longer sign in, and their connected apps stopped working.",
    "uninvited": "Invitation revoked: its link no longer works.",
}


def assignable(me: SignedIn) -> list[str]:
    """The roles this member may give (members/rules.py may_assign): an owner any, an admin not owner."""
    return [r for r in ROLES if me.role == "owner" or r != "owner"] if me.role in MANAGERS else []


async def _page(
    request: Request,
    api: NamespaceAPI,
    me: SignedIn,
    *,
    form: Form | None = None,
    error: str | None = None,
    status_code: int = 200,
) -> Response:
    cursor = request.query_params.get("cursor") or None
    members = await api.list_members(me.principal, cursor=cursor)
    invitations = await api.list_invitations(me.principal, cursor=request.query_params.get("inv_cursor") or None)
    return dash(
        request,
        me,
        "members.html",
        active="members",
        title="Members",
        notice=NOTICES.get(request.query_params.get("done", "")),
        status_code=status_code,
        members=members.data,
        next_cursor=members.next_cursor,
        invitations=invitations.data,
        next_inv_cursor=invitations.next_cursor,
        paged=cursor is not None or "inv_cursor" in request.query_params,
        roles=assignable(me),
        entered={"email": form.get("email") if form else "", "role": form.get("role") if form else "member"},
        error=error,
    )


@router.get(PATH)
async def members_page(request: Request, api: Api, me: Me) -> Response:
    return await _page(request, api, me)


@router.post(PATH + "/invite")
async def invite(request: Request, api: Api, me: Me, form: MemberForm) -> Response:
    try:
        body = validated(InvitationIn, email=form.get("email"), role=form.get("role") or "member")
        await api.invite_member(me.principal, body)
    except MemvaultError as exc:
        if not 400 <= exc.status < 500:
            raise
        return await _page(request, api, me, form=form, error=exc.detail, status_code=exc.status)
    return see_other(PATH, done="invited")


@router.post(PATH + "/{user_id}/role")
async def change_role(user_id: uuid.UUID, api: Api, me: Me, form: MemberForm) -> Response:
    await api.change_member_role(me.principal, user_id, validated(MemberPatch, role=form.get("role")))
    return see_other(PATH, done="role")


@router.post(PATH + "/{user_id}/remove")
async def remove(user_id: uuid.UUID, api: Api, me: Me, form: MemberForm) -> Response:
    await api.remove_member(me.principal, user_id)
    return see_other(PATH, done="removed")


@router.post(PATH + "/invitations/{invitation_id}/revoke")
async def revoke_invitation(invitation_id: uuid.UUID, api: Api, me: Me, form: MemberForm) -> Response:
    await api.revoke_invitation(me.principal, invitation_id)
    return see_other(PATH, done="uninvited")
