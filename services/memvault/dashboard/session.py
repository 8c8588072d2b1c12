"""The dashboard's cookies and forms: who is signed in, and whether a form came from our page.

- ``mv_session``: the session token (HttpOnly, SameSite=Lax, Secure behind https, path /dashboard
  so no other route ever sees it).
- Every form carries ``csrf``. Signed in, it is derived from the session's secret
  (websessions/service.py csrf_of); before sign-in (the sign-in form itself, against login CSRF)
  it must equal the ``mv_csrf`` cookie that the form's page set. A form post also has to come from
  our own origin when the browser says where it came from.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Annotated
from urllib.parse import parse_qs, urlencode, urlsplit

from fastapi import Depends, Request
from starlette.responses import RedirectResponse, Response

from memvault.api import NamespaceAPI
from memvault.errors import Forbidden, InvalidInput
from memvault.gateway.deps import get_api
from memvault.web.render import PAGE_HEADERS
from memvault.websessions.service import SignedIn

SESSION_COOKIE = "mv_session"
ANON_CSRF_COOKIE = "mv_csrf"
MAX_FORM_BYTES = 64 * 1024


class CsrfFailed(Forbidden):
    code = "csrf_failed"
    title = "Form expired"


def address(request: Request) -> str | None:
    # uvicorn puts the forwarded client here when it trusts the proxy (--forwarded-allow-ips).
    return request.client.host if request.client else None


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


async def signed_in(request: Request, api: Annotated[NamespaceAPI, Depends(get_api)]) -> SignedIn:
    """The signed-in member, or 401 sign_in_required (a page GET is sent to the sign-in form)."""
    me = await api.web_session(request.cookies.get(SESSION_COOKIE))
    request.state.principal = me.principal
    return me


Me = Annotated[SignedIn, Depends(signed_in)]


class Form:
    """A posted form's fields, each given once."""

    def __init__(self, fields: dict[str, list[str]]) -> None:
        self._fields = fields

    def get(self, name: str, default: str = "") -> str:
        values = self._fields.get(name)
        return values[0] if values else default

    def all(self, name: str) -> list[str]:
        return list(self._fields.get(name, []))

    def __contains__(self, name: str) -> bool:
        return name in self._fields


async def read_form(request: Request) -> Form:
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise InvalidInput("The form is too large.")
    try:
        fields = parse_qs(body.decode(), keep_blank_values=True)
    except UnicodeDecodeError as exc:
        raise InvalidInput("The form is not UTF-8.") from exc
    if any("\x00" in v for values in fields.values() for v in values):
        raise InvalidInput("The form cannot contain NUL characters.")
    return Form(fields)


def _same_origin(request: Request) -> bool:
    """Whether a post came from a page of ours: the URL it was sent to, or the public URL (behind
    a proxy that terminates TLS the app may see http://internal-host while the browser says
    https://memvault.example)."""
    origin = request.headers.get("origin")
    if origin is None:  # old browsers and non-browser clients: the token decides
        return True
    got = urlsplit(origin)
    public = urlsplit(request.app.state.api.oauth_endpoint_base())
    return (got.scheme, got.netloc) in {(request.url.scheme, request.url.netloc), (public.scheme, public.netloc)}


def _check(request: Request, sent: str, expected: str | None) -> None:
    if not _same_origin(request):
        raise CsrfFailed("This form did not come from memvault's dashboard.")
    if not expected or not sent or not hmac.compare_digest(sent, expected):
        raise CsrfFailed("This form has expired or did not come from this page: reload the page and try again.")


async def member_form(request: Request, me: Me) -> Form:
    """A signed-in member's form, its CSRF token checked; use as ``form: MemberForm``."""
    form = await read_form(request)
    _check(request, form.get("csrf"), me.csrf)
    return form


MemberForm = Annotated[Form, Depends(member_form)]


async def anonymous_form(request: Request) -> Form:
    """A form posted before sign-in (sign-in, sign-up, invitations): double-submit CSRF cookie."""
    form = await read_form(request)
    _check(request, form.get("csrf"), request.cookies.get(ANON_CSRF_COOKIE))
    return form


AnonymousForm = Annotated[Form, Depends(anonymous_form)]


def anonymous_csrf(request: Request) -> str:
    """The token for a form shown before sign-in: the visitor's cookie's, or a new one (set it
    with ``keep_anonymous_csrf`` on the response)."""
    return request.cookies.get(ANON_CSRF_COOKIE) or secrets.token_urlsafe(24)


def keep_anonymous_csrf(request: Request, response: Response, token: str) -> Response:
    if request.cookies.get(ANON_CSRF_COOKIE) != token:
        response.set_cookie(
            ANON_CSRF_COOKIE, token, httponly=True, samesite="strict", secure=_secure(request), path="/"
        )
    return response


def start_session(request: Request, response: Response, token: str) -> Response:
    response.set_cookie(
        SESSION_COOKIE, token, httponly=True, samesite="lax", secure=_secure(request), path="/dashboard"
    )
    return response


def end_session(response: Response) -> Response:
    response.delete_cookie(SESSION_COOKIE, path="/dashboard")
    return response


def see_other(path: str, **query: str | None) -> RedirectResponse:
    """After a form post: 303 to a page of ours (a GET; reloading it posts nothing again)."""
    if not path.startswith("/") or path.startswith("//"):
        path = "/dashboard"
    params = {k: v for k, v in query.items() if v is not None}
    location = f"{path}?{urlencode(params)}" if params else path
    return RedirectResponse(location, status_code=303, headers=PAGE_HEADERS)


def safe_next(value: str | None) -> str:
    """Where to go after sign-in: a dashboard path of ours, never another site."""
    if value and value.startswith("/dashboard") and not value.startswith("//") and "\\" not in value:
        return value
    return "/dashboard"
