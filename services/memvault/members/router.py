"""Sign-up, email verification, members and invitations: the REST routes. The pages that post to
the same facade methods (/signup, /signup/verify, /invitations/accept) are dashboard/accounts.py."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Request

from memvault.gateway.deps import AdminPrincipal, Api
from memvault.gateway.idempotency import IDEMPOTENT, NOT_IDEMPOTENT
from memvault.gateway.openapi import answers
from memvault.members.schemas import (
    AcceptedOut,
    AcceptIn,
    InvitationIn,
    InvitationOut,
    InvitationPage,
    MemberOut,
    MemberPage,
    MemberPatch,
    ResendIn,
    ResendOut,
    SignupIn,
    SignupOut,
    TokenIn,
    VerifiedOut,
)

router = APIRouter(prefix="/v1", tags=["members"])

Limit = Annotated[int, Query(ge=1, le=200)]
Cursor = Annotated[str | None, Query(max_length=500)]


def _address(request: Request) -> str | None:
    return request.client.host if request.client else None


# ---- sign-up (unauthenticated) ---------------------------------------------------------------


@router.post("/signup", status_code=201, dependencies=[NOT_IDEMPOTENT])
@answers(403, 409, 429)
async def signup(body: SignupIn, request: Request, api: Api) -> SignupOut:
    """Create an organisation (a tenant on the sign-up plan), its first namespace and its owner,
    and mail the owner a verification link. No credentials. 403 `signup_closed` when the operator
    closed sign-up; 429 `rate_limited` past the per-address limit."""
    return await api.signup(body, address=_address(request))


@router.post("/signup/verify", dependencies=[NOT_IDEMPOTENT])
@answers(400, 410)
async def verify_signup(body: TokenIn, api: Api) -> VerifiedOut:
    """Verify the owner's address with the mailed link's token. The first verification answers
    with the organisation's admin API key, shown this once."""
    return await api.verify_signup(body.token)


@router.post("/signup/resend", status_code=202, dependencies=[NOT_IDEMPOTENT])
@answers(403, 429)
async def resend_verification(body: ResendIn, request: Request, api: Api) -> ResendOut:
    """Mail a new verification link for the address's unverified sign-ups. Always the same 202:
    the answer does not say whether the address has an account."""
    await api.resend_verification(body, address=_address(request))
    return ResendOut()


@router.post("/invitations/accept", status_code=201, dependencies=[NOT_IDEMPOTENT])
@answers(400, 403, 409, 410, 429)
async def accept_invitation(body: AcceptIn, request: Request, api: Api) -> AcceptedOut:
    """Accept an invitation with its link's token and a password: the invited address becomes a
    member of the inviting organisation, with the invited role."""
    return await api.accept_invitation(body, address=_address(request))


# ---- members (admin) -------------------------------------------------------------------------


@router.get("/members")
async def list_members(p: AdminPrincipal, api: Api, limit: Limit = 50, cursor: Cursor = None) -> MemberPage:
    """The organisation's members newest first, with their roles; follow `next_cursor`."""
    return await api.list_members(p, limit=limit, cursor=cursor)


@router.patch("/members/{user_id}", dependencies=[IDEMPOTENT])
async def change_member_role(user_id: uuid.UUID, body: MemberPatch, p: AdminPrincipal, api: Api) -> MemberOut:
    """Change a member's role. Only owners make or unmake owners; the last owner stays (409 `last_owner`)."""
    return await api.change_member_role(p, user_id, body)


@router.delete("/members/{user_id}", dependencies=[IDEMPOTENT])
async def remove_member(user_id: uuid.UUID, p: AdminPrincipal, api: Api) -> MemberOut:
    """Remove a member; their OAuth grants and tokens end now. Never the last owner (409 `last_owner`)."""
    return await api.remove_member(p, user_id)


@router.post("/members/invitations", status_code=201, dependencies=[IDEMPOTENT])
async def invite_member(body: InvitationIn, p: AdminPrincipal, api: Api) -> InvitationOut:
    """Invite someone by email with a role; they get a signed link that expires."""
    return await api.invite_member(p, body)


@router.get("/members/invitations")
async def list_invitations(
    p: AdminPrincipal, api: Api, pending: bool = True, limit: Limit = 50, cursor: Cursor = None
) -> InvitationPage:
    """Invitations newest first: by default those that may still be accepted."""
    return await api.list_invitations(p, pending=pending, limit=limit, cursor=cursor)


@router.delete("/members/invitations/{invitation_id}", dependencies=[IDEMPOTENT])
async def revoke_invitation(invitation_id: uuid.UUID, p: AdminPrincipal, api: Api) -> InvitationOut:
    """End an invitation: its link stops working."""
    return await api.revoke_invitation(p, invitation_id)
