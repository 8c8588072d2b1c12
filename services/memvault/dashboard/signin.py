"""Signing in to the dashboard and out again. The password rule is the MCP sign-in's (Argon2id,
verified and enabled users, the sign-in rate limits): SignInOps.check_password."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from memvault.dashboard.session import (
    AnonymousForm,
    MemberForm,
    address,
    anonymous_csrf,
    end_session,
    keep_anonymous_csrf,
    safe_next,
    see_other,
    start_session,
)
from memvault.gateway.deps import Api
from memvault.oauth.authorization import ChooseAccount, LoginFailed
from memvault.ratelimit import RateLimited
from memvault.web.render import page
from memvault.websessions.service import SignInRequired

router = APIRouter(include_in_schema=False)


def _form(
    request: Request,
    *,
    next_path: str,
    email: str = "",
    error: str | None = None,
    accounts: list[str] | None = None,
    status_code: int = 200,
    headers: dict[str, str] | None = None,
) -> Response:
    token = anonymous_csrf(request)
    response = page(
        "dashboard/signin.html",
        {"csrf": token, "next": next_path, "email": email, "error": error, "accounts": accounts or []},
        status_code=status_code,
    )
    response.headers.update(headers or {})
    return keep_anonymous_csrf(request, response, token)


@router.get("/dashboard/signin")
async def signin_page(request: Request, api: Api) -> Response:
    next_path = safe_next(request.query_params.get("next"))
    try:
        await api.web_session(request.cookies.get("mv_session"))
    except SignInRequired:
        return _form(request, next_path=next_path)
    return see_other(next_path)


@router.post("/dashboard/signin")
async def signin(request: Request, api: Api, form: AnonymousForm) -> Response:
    email, next_path = form.get("email").strip(), safe_next(form.get("next"))
    try:
        token = await api.open_web_session(
            email,
            form.get("password"),
            address=address(request),
            user_agent=request.headers.get("user-agent"),
            account=form.get("account") or None,
        )
    except ChooseAccount as exc:
        return _form(request, next_path=next_path, email=email, error=exc.detail, accounts=exc.accounts)
    except LoginFailed as exc:
        return _form(request, next_path=next_path, email=email, error=exc.detail, status_code=401)
    except RateLimited as exc:
        return _form(
            request,
            next_path=next_path,
            email=email,
            error=exc.detail,
            status_code=429,
            headers=exc.response_headers(),
        )
    return start_session(request, see_other(next_path), token)


@router.post("/dashboard/signout")
async def signout(request: Request, api: Api, form: MemberForm) -> Response:
    await api.end_web_session(request.cookies.get("mv_session"))
    return end_session(see_other("/dashboard/signin"))
