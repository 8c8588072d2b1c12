"""OAuth endpoints (discovery, registration, authorization pages, token, revocation, JWKS) and the
REST routes for tenant users and the account's OAuth clients and grants.

The OAuth endpoints speak OAuth: form-encoded requests, `{"error": ..., "error_description": ...}`
answers, `Cache-Control: no-store` on anything carrying a token. Everything else is problem JSON.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse

from memvault.gateway.deps import AdminPrincipal, Api
from memvault.gateway.idempotency import IDEMPOTENT, NOT_IDEMPOTENT
from memvault.oauth import clients, pages
from memvault.oauth.authorization import ChooseAccount, ConsentInvalid, LoginFailed, RedirectError
from memvault.oauth.errors import InvalidRequest, OAuthError
from memvault.oauth.schemas import AccountOut, GrantOut, UserIn, UserOut, UserPage
from memvault.ratelimit import RateLimited

router = APIRouter(tags=["oauth"])
users_router = APIRouter(prefix="/v1", tags=["users"])

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
# Browser-based MCP clients (the MCP Inspector) call these from another origin; none of them takes
# cookies or ambient credentials, so any origin may.
CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
    "Access-Control-Allow-Headers": "Content-Type, Authorization, MCP-Protocol-Version",
}
PAGE_HEADERS = {
    **NO_STORE,
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    # Not no-referrer: under it a browser sends `Origin: null` with the form posts, and those are
    # checked against our own origin. same-origin still tells the client's site nothing.
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}
MAX_FORM_BYTES = 64 * 1024


def _json(body: Any, status: int = 200, *, no_store: bool = False) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers={**CORS, **(NO_STORE if no_store else {})})


def _oauth_error(exc: OAuthError) -> JSONResponse:
    return _json(exc.oauth_body(), exc.status, no_store=True)


async def _form(request: Request) -> dict[str, list[str]]:
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise InvalidRequest("The form is too large.")
    try:
        return parse_qs(body.decode(), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError as exc:
        raise InvalidRequest("The form is not UTF-8.") from exc


def _single(form: dict[str, list[str]], *, multi: tuple[str, ...] = ()) -> dict[str, str]:
    """OAuth parameters may not repeat (RFC 6749 §3.1)."""
    out: dict[str, str] = {}
    for k, values in form.items():
        if k in multi:
            continue
        if len(values) != 1:
            raise InvalidRequest(f"Parameter {k!r} is repeated.")
        if "\x00" in k or "\x00" in values[0]:
            # PostgreSQL text cannot hold NUL: a lookup by such a client_id or code would fail deep down.
            raise InvalidRequest("Parameters cannot contain NUL characters.")
        out[k] = values[0]
    return out


async def _oauth(fn: Callable[[], Awaitable[Response]]) -> Response:
    try:
        return await fn()
    except OAuthError as exc:
        return _oauth_error(exc)
    except RateLimited as exc:
        # Problem JSON, with the OAuth `error` beside it for clients that read only that.
        body = {**exc.problem(), "error": "rate_limited", "error_description": exc.detail}
        headers = {**CORS, **NO_STORE, **exc.response_headers()}
        return JSONResponse(body, status_code=exc.status, headers=headers, media_type="application/problem+json")


def _address(request: Request) -> str | None:
    # uvicorn puts the forwarded client here when it trusts the proxy (--forwarded-allow-ips).
    return request.client.host if request.client else None


# ---- discovery ---------------------------------------------------------------------------------------


@router.get("/.well-known/oauth-protected-resource/mcp/core", include_in_schema=False)
@router.get("/.well-known/oauth-protected-resource/mcp/extended", include_in_schema=False)
@router.get("/.well-known/oauth-protected-resource/mcp", include_in_schema=False)
@router.get("/.well-known/oauth-protected-resource", include_in_schema=False)
async def protected_resource(api: Api) -> JSONResponse:
    """RFC 9728: the /mcp endpoint as a protected resource, and who issues tokens for it. A client
    of /mcp/core or /mcp/extended looks here too (the path-based URL first): those are the same
    resource, so the metadata names /mcp, which such clients accept as the parent of their URL."""
    return _json(api.protected_resource_metadata())


@router.get("/.well-known/oauth-authorization-server", include_in_schema=False)
async def authorization_server(api: Api) -> JSONResponse:
    """RFC 8414 authorization server metadata."""
    return _json(api.authorization_server_metadata())


@router.get("/oauth/jwks.json", include_in_schema=False)
async def jwks(api: Api) -> JSONResponse:
    """The public keys that verify access tokens: the signing key and recently retired ones."""
    return _json(await api.jwks())


@router.options("/.well-known/oauth-protected-resource/mcp/core", include_in_schema=False)
@router.options("/.well-known/oauth-protected-resource/mcp/extended", include_in_schema=False)
@router.options("/.well-known/oauth-protected-resource/mcp", include_in_schema=False)
@router.options("/.well-known/oauth-protected-resource", include_in_schema=False)
@router.options("/.well-known/oauth-authorization-server", include_in_schema=False)
@router.options("/oauth/jwks.json", include_in_schema=False)
@router.options("/oauth/register", include_in_schema=False)
@router.options("/oauth/token", include_in_schema=False)
@router.options("/oauth/revoke", include_in_schema=False)
async def preflight() -> Response:
    """CORS preflight for browser-based MCP clients."""
    return Response(status_code=204, headers={**CORS, "Access-Control-Max-Age": "86400"})


# ---- registration, token, revocation ------------------------------------------------------------------


@router.post("/oauth/register", include_in_schema=False)
async def register(request: Request, api: Api) -> Response:
    """RFC 7591 dynamic client registration (public clients only: no secret is issued)."""

    async def run() -> Response:
        body = clients.parse_registration(await request.body())
        return _json(await api.register_client(body, address=_address(request)), 201, no_store=True)

    return await _oauth(run)


@router.post("/oauth/token", include_in_schema=False)
async def token(request: Request, api: Api) -> Response:
    """Authorization code (with PKCE) and refresh token grants."""

    async def run() -> Response:
        return _json(await api.token(_single(await _form(request)), address=_address(request)), no_store=True)

    return await _oauth(run)


@router.post("/oauth/revoke", include_in_schema=False)
async def revoke(request: Request, api: Api) -> Response:
    """RFC 7009: revoke a refresh or access token, which ends its whole grant."""

    async def run() -> Response:
        await api.revoke_token(_single(await _form(request)))
        return Response(status_code=200, headers={**CORS, **NO_STORE})

    return await _oauth(run)


# ---- the authorization pages -----------------------------------------------------------------------


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers=PAGE_HEADERS)


def _redirect(location: str) -> RedirectResponse:
    # 303: the browser follows a POST's answer with a GET, never re-posting the form to the client.
    return RedirectResponse(location, status_code=303, headers=PAGE_HEADERS)


@router.get("/oauth/authorize", include_in_schema=False)
async def authorize_page(request: Request, api: Api) -> Response:
    """The authorization endpoint: checks the request, then asks the user to sign in."""
    try:
        req = await api.check_authorization_request(_single(parse_qs(request.url.query, keep_blank_values=True)))
    except RedirectError as exc:
        return _redirect(exc.location)
    except OAuthError as exc:
        return _html(pages.problem("This sign-in link is not valid", exc.detail), 400)
    return _html(pages.login(req))


def _same_origin(request: Request, api: Api) -> bool:
    """The forms post to us from our own pages only. Browsers send `Origin` with every POST; a
    form on another site that posts here (cross-site request forgery of a consent or sign-in)
    carries that site's origin, or `null`."""
    ours = urlsplit(api.oauth_endpoint_base())
    got = urlsplit(request.headers.get("origin", ""))
    return (got.scheme, got.netloc) == (ours.scheme, ours.netloc)


@router.post("/oauth/authorize", include_in_schema=False)
async def authorize_submit(request: Request, api: Api) -> Response:
    """The sign-in form (step=login) and the consent form (step=consent)."""
    if not _same_origin(request, api):
        return _html(pages.problem("This form did not come from memvault", "Start again from the application."), 403)
    try:
        form = await _form(request)
        req = await api.check_authorization_request(_single(form, multi=("grant_scope", "namespace")))
    except RedirectError as exc:
        return _redirect(exc.location)
    except OAuthError as exc:
        return _html(pages.problem("This sign-in link is not valid", exc.detail), 400)
    fields = {k: v[0] for k, v in form.items() if v}
    if fields.get("step") == "login":
        email = fields.get("email", "")
        try:
            view = await api.sign_in(
                req, email, fields.get("password", ""), address=_address(request), account=fields.get("account")
            )
        except ChooseAccount as exc:
            return _html(pages.login(req, error=exc.detail, email=email, accounts=exc.accounts), 200)
        except LoginFailed as exc:
            return _html(pages.login(req, error=exc.detail, email=email), 401)
        except RateLimited as exc:
            page = pages.login(req, error=exc.detail, email=email)
            return HTMLResponse(page, status_code=429, headers={**PAGE_HEADERS, **exc.response_headers()})
        return _html(pages.consent(view))
    if fields.get("step") == "consent":
        ticket = fields.get("ticket", "")
        try:
            location = await api.answer_consent(
                req,
                ticket,
                allow=fields.get("decision") == "allow",
                namespaces=form.get("namespace", []),
                scopes=form.get("grant_scope", []),
            )
        except LoginFailed as exc:
            return _html(pages.login(req, error=exc.detail), 401)
        except ConsentInvalid as exc:
            return _html(pages.consent(await api.consent_view(req, ticket), error=exc.detail), 400)
        return _redirect(location)
    return _html(pages.problem("Unexpected form", "Start again from the application."), 400)


# ---- tenant users and the account ----------------------------------------------------------------------


@users_router.post("/users", status_code=201, dependencies=[NOT_IDEMPOTENT])
async def create_user(body: UserIn, p: AdminPrincipal, api: Api) -> UserOut:
    """Create a tenant user who signs in to MCP clients (OAuth) with this email and password."""
    return await api.create_user(p, body)


@users_router.get("/users")
async def list_users(
    p: AdminPrincipal,
    api: Api,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
) -> UserPage:
    """The tenant's users newest first, with their roles; follow `next_cursor` (docs/accounts.md)."""
    return await api.list_users(p, limit=limit, cursor=cursor)


@users_router.post("/users/{user_id}/disable", dependencies=[IDEMPOTENT])
async def disable_user(user_id: uuid.UUID, p: AdminPrincipal, api: Api) -> UserOut:
    """Disable a user: no more sign-ins, and every OAuth grant they gave is revoked now."""
    return await api.disable_user(p, user_id)


@users_router.get("/account")
async def account(p: AdminPrincipal, api: Api) -> AccountOut:
    """The tenant's OAuth clients and grants (who let which application use which namespaces)."""
    return await api.get_account(p)


@users_router.delete("/account/grants/{grant_id}", dependencies=[IDEMPOTENT])
async def revoke_grant(grant_id: uuid.UUID, p: AdminPrincipal, api: Api) -> GrantOut:
    """Revoke one grant: the application's tokens stop working at once."""
    return await api.revoke_grant(p, grant_id)
