"""Sign-up, email verification, members and invitations: the REST routes, and the plain HTML
pages (/signup, /signup/verify, /invitations/accept) that post to the same facade methods."""

from __future__ import annotations

import uuid
from typing import Annotated
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from memvault.errors import MemvaultError
from memvault.gateway.deps import AdminPrincipal, Api
from memvault.gateway.idempotency import IDEMPOTENT, NOT_IDEMPOTENT
from memvault.gateway.openapi import answers
from memvault.members import pages
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
from memvault.oauth.router import PAGE_HEADERS

router = APIRouter(prefix="/v1", tags=["members"])
pages_router = APIRouter(include_in_schema=False)

Limit = Annotated[int, Query(ge=1, le=200)]
Cursor = Annotated[str | None, Query(max_length=500)]
MAX_FORM_BYTES = 16 * 1024


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


# ---- the pages -------------------------------------------------------------------------------


def _html(body: str, status: int = 200, headers: dict[str, str] | None = None) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers={**PAGE_HEADERS, **(headers or {})})


async def _fields(request: Request, api: Api) -> dict[str, str] | None:
    """The form's fields, or None when it did not come from our own page (cross-site forgery)."""
    ours = urlsplit(api.oauth_endpoint_base())
    got = urlsplit(request.headers.get("origin", ""))
    if (got.scheme, got.netloc) != (ours.scheme, ours.netloc):
        return None
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        return None
    try:
        return {k: v[0] for k, v in parse_qs(body.decode(), keep_blank_values=True).items()}
    except UnicodeDecodeError:
        return None


def _message(exc: MemvaultError | ValidationError) -> str:
    if isinstance(exc, MemvaultError):
        return exc.detail
    first = exc.errors()[0]
    return f"{'.'.join(str(x) for x in first['loc'])}: {first['msg']}"


def _status(exc: MemvaultError | ValidationError) -> tuple[int, dict[str, str]]:
    if isinstance(exc, MemvaultError):
        return exc.status, exc.response_headers()
    return 422, {}


FORGED = "This form did not come from memvault; start again from the page."


@pages_router.get("/signup")
async def signup_page(api: Api) -> HTMLResponse:
    return _html(pages.signup(closed=api.signup_closed))


@pages_router.post("/signup")
async def signup_submit(request: Request, api: Api) -> HTMLResponse:
    fields = await _fields(request, api)
    if fields is None:
        return _html(pages.signup(error=FORGED), 403)
    email, organisation = fields.get("email", ""), fields.get("organisation", "")
    try:
        body = SignupIn(email=email, password=fields.get("password", ""), organisation=organisation)
        out = await api.signup(body, address=_address(request))
    except (MemvaultError, ValidationError) as exc:
        status, headers = _status(exc)
        return _html(pages.signup(error=_message(exc), email=email, organisation=organisation), status, headers)
    return _html(pages.signup_sent(out.email), 201)


@pages_router.get("/signup/verify")
async def verify_page(token: Annotated[str, Query(max_length=4096)] = "") -> HTMLResponse:
    return _html(pages.verify(token))


@pages_router.post("/signup/verify")
async def verify_submit(request: Request, api: Api) -> HTMLResponse:
    fields = await _fields(request, api)
    if fields is None:
        return _html(pages.verify("", error=FORGED), 403)
    token = fields.get("token", "")
    try:
        out = await api.verify_signup(TokenIn(token=token).token)
    except (MemvaultError, ValidationError) as exc:
        status, headers = _status(exc)
        return _html(pages.verify(token, error=_message(exc)), status, headers)
    return _html(pages.verified(out.organisation, out.namespace, out.api_key))


@pages_router.get("/invitations/accept")
async def accept_page(token: Annotated[str, Query(max_length=4096)] = "") -> HTMLResponse:
    return _html(pages.accept(token))


@pages_router.post("/invitations/accept")
async def accept_submit(request: Request, api: Api) -> HTMLResponse:
    fields = await _fields(request, api)
    if fields is None:
        return _html(pages.accept("", error=FORGED), 403)
    token = fields.get("token", "")
    try:
        out = await api.accept_invitation(
            AcceptIn(token=token, password=fields.get("password", "")), address=_address(request)
        )
    except (MemvaultError, ValidationError) as exc:
        status, headers = _status(exc)
        return _html(pages.accept(token, error=_message(exc)), status, headers)
    return _html(pages.accepted(out.organisation, out.member.email), 201)
