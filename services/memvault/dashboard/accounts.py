"""The account pages seen before sign-in: sign-up, email verification and accepting an invitation.
They post to the same facade methods as POST /v1/signup, /v1/signup/verify and
/v1/invitations/accept (with their rate limits), and carry the anonymous form token of the
sign-in page (the ``mv_csrf`` cookie's path is /, so it reaches these paths too)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import ValidationError
from starlette.responses import Response

from memvault.dashboard.session import AnonymousForm, address, anonymous_csrf, keep_anonymous_csrf
from memvault.errors import MemvaultError
from memvault.gateway.deps import Api
from memvault.members.schemas import AcceptIn, SignupIn, TokenIn
from memvault.web.render import page

router = APIRouter(include_in_schema=False)

LinkToken = Annotated[str, Query(max_length=4096)]
# The pages before sign-in kept the OAuth pages' header; CSP's frame-ancestors says the same to
# newer browsers.


def _render(
    request: Request,
    template: str,
    *,
    title: str,
    status_code: int = 200,
    headers: dict[str, str] | None = None,
    script: bool = False,
    **context: Any,
) -> Response:
    token = anonymous_csrf(request)
    response = page(
        f"dashboard/{template}",
        {"csrf": token, "title": title, "script": script, **context},
        status_code=status_code,
        script=script,
    )
    response.headers.update(headers or {})
    return keep_anonymous_csrf(request, response, token)


def _refusal(exc: MemvaultError | ValidationError) -> tuple[str, int, dict[str, str]]:
    """What to tell the person on the form, with the status and headers REST would answer."""
    if isinstance(exc, MemvaultError):
        return exc.detail, exc.status, exc.response_headers()
    first = exc.errors()[0]
    return f"{'.'.join(str(x) for x in first['loc'])}: {first['msg']}", 422, {}


@router.get("/signup")
async def signup_page(request: Request, api: Api) -> Response:
    return _render(request, "signup.html", title="Sign up", closed=api.signup_closed, email="", organisation="")


@router.post("/signup")
async def signup(request: Request, api: Api, form: AnonymousForm) -> Response:
    email, organisation = form.get("email"), form.get("organisation")
    try:
        body = SignupIn(email=email, password=form.get("password"), organisation=organisation)
        out = await api.signup(body, address=address(request))
    except (MemvaultError, ValidationError) as exc:
        error, status, headers = _refusal(exc)
        return _render(
            request,
            "signup.html",
            title="Sign up",
            status_code=status,
            headers=headers,
            closed=api.signup_closed,
            error=error,
            email=email,
            organisation=organisation,
        )
    return _render(request, "signup_sent.html", title="Check your mail", status_code=201, email=out.email)


@router.get("/signup/verify")
async def verify_page(request: Request, token: LinkToken = "") -> Response:
    return _render(request, "verify.html", title="Verify your email", token=token)


@router.post("/signup/verify")
async def verify(request: Request, api: Api, form: AnonymousForm) -> Response:
    token = form.get("token")
    try:
        out = await api.verify_signup(TokenIn(token=token).token)
    except (MemvaultError, ValidationError) as exc:
        error, status, headers = _refusal(exc)
        return _render(
            request,
            "verify.html",
            title="Verify your email",
            status_code=status,
            headers=headers,
            token=token,
            error=error,
        )
    return _render(
        request,
        "verified.html",
        title="Verified",
        script=True,
        organisation=out.organisation,
        namespace=out.namespace,
        api_key=out.api_key,
    )


@router.get("/invitations/accept")
async def accept_page(request: Request, token: LinkToken = "") -> Response:
    return _render(request, "accept.html", title="Accept the invitation", token=token)


@router.post("/invitations/accept")
async def accept(request: Request, api: Api, form: AnonymousForm) -> Response:
    token = form.get("token")
    try:
        body = AcceptIn(token=token, password=form.get("password"))
        out = await api.accept_invitation(body, address=address(request))
    except (MemvaultError, ValidationError) as exc:
        error, status, headers = _refusal(exc)
        return _render(
            request,
            "accept.html",
            title="Accept the invitation",
            status_code=status,
            headers=headers,
            token=token,
            error=error,
        )
    return _render(
        request,
        "accepted.html",
        title="Welcome",
        status_code=201,
        organisation=out.organisation,
        email=out.member.email,
    )
