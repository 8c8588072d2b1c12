"""SignInOps: the authorization endpoint's flow. The request is checked (client, redirect URI,
PKCE, resource, scopes); the user signs in with a tenant user's password and gets a short-lived
ticket bound to that request; the consent page's answer spends the ticket once and sends the
browser back to the client with a code (or access_denied). check_password is also the dashboard's
sign-in rule (websessions/).
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

from joserfc import jwt
from joserfc.errors import JoseError

from memvault.oauth import clients, secrets
from memvault.oauth import repository as repo
from memvault.oauth.authorization import (
    AuthorizationRequest,
    ChooseAccount,
    ConsentInvalid,
    ConsentView,
    LoginFailed,
    RedirectError,
    scopes_of,
    user_principal,
    with_params,
)
from memvault.oauth.errors import InvalidRedirectUri, InvalidRequest, InvalidTarget, OAuthError, UnknownClient
from memvault.oauth.issuer import IssuerOps
from memvault.oauth.keys import ALG
from memvault.oauth.repository import FoundUser
from memvault.oauth.schemas import DEFAULT_OAUTH_SCOPES, OAUTH_SCOPES
from memvault.ratelimit import Limit, client_address

LOGIN_TICKET_TYP = "memvault-login+jwt"
MAX_STATE_LENGTH = 1024


class SignInOps(IssuerOps):
    async def check_authorization_request(self, params: dict[str, str]) -> AuthorizationRequest:
        """Validate an authorization request. Until the client and its redirect URI are known
        good, errors are shown to the user (UnknownClient, InvalidRedirectUri); after that they go
        back to the client as RedirectError."""
        client_id = params.get("client_id") or ""
        if not client_id:
            raise UnknownClient("The request names no client_id.")
        client = await self._client(client_id)
        redirect_uri = params.get("redirect_uri")
        if redirect_uri is None:
            if len(client.redirect_uris) != 1:
                raise InvalidRedirectUri("redirect_uri is required: the client registered several.")
            redirect_uri = client.redirect_uris[0]
        elif not clients.redirect_matches(
            redirect_uri, client.redirect_uris, extra_schemes=self._settings.oauth_extra_redirect_schemes
        ):
            raise InvalidRedirectUri("redirect_uri is not one this client registered.")
        state = params.get("state")

        def fail(err: OAuthError) -> OAuthError:
            if client.granted_at is None:
                # Nobody has let this client in yet: anyone may have registered it, so its redirect
                # URI is not trusted with our errors (RFC 9700 §4.11.2). The person sees a page.
                return InvalidRequest(err.detail)
            return RedirectError(err, redirect_uri, state, self.oauth_issuer)

        if params.get("response_type") != "code":
            err = InvalidRequest("response_type must be 'code'.")
            err.error = "unsupported_response_type"  # type: ignore[misc]
            raise fail(err)
        if state is not None and len(state) > MAX_STATE_LENGTH:
            raise fail(InvalidRequest("state is too long."))
        challenge = params.get("code_challenge") or ""
        if params.get("code_challenge_method") != "S256" or not 43 <= len(challenge) <= 128:
            raise fail(InvalidRequest("PKCE is required: code_challenge with code_challenge_method=S256."))
        resource = params.get("resource")
        if not resource:
            raise fail(InvalidTarget(f"resource is required (RFC 8707): {self.mcp_resource}"))
        if resource.rstrip("/") != self.mcp_resource:
            raise fail(InvalidTarget(f"This server issues tokens only for {self.mcp_resource}."))
        try:
            scopes = scopes_of(params.get("scope"))
        except OAuthError as exc:
            raise fail(exc) from exc
        return AuthorizationRequest(
            client_id=client.client_id,
            client_name=client.client_name,
            redirect_uri=redirect_uri,
            state=state,
            code_challenge=challenge,
            scopes=scopes,
            resource=self.mcp_resource,
        )

    async def sign_in(
        self,
        req: AuthorizationRequest,
        email: str,
        password: str,
        *,
        address: str | None = None,
        account: str | None = None,
    ) -> ConsentView:
        """Check a tenant user's password; the consent page comes next, with a ticket binding the
        user to this request."""
        found = await self.check_password(email, password, address=address, account=account)
        async with self._db.tenant_tx(found.tenant_id) as tx:
            await repo.mark_login(tx.session, found.tenant_id, found.id)
        now = int(time.time())
        claims = {
            "iss": self.oauth_issuer,
            "aud": self._endpoint("/oauth/authorize"),
            "sub": str(found.id),
            "tid": str(found.tenant_id),
            "req": req.fingerprint(),
            "jti": uuid.uuid4().hex,
            "iat": now,
            "exp": now + self._settings.oauth_login_ttl_s,
        }
        key = await self._keyring.signing_key()
        ticket = jwt.encode({"alg": ALG, "kid": key.kid, "typ": LOGIN_TICKET_TYP}, claims, key, algorithms=[ALG])
        return await self._consent_view(req, ticket, found.tenant_id, found.id)

    async def check_password(
        self, email: str, password: str, *, address: str | None = None, account: str | None = None
    ) -> FoundUser:
        """The one sign-in rule, for MCP clients' sign-in page and the dashboard's: a verified,
        enabled tenant user whose password this is, or LoginFailed / ChooseAccount / RateLimited.

        Users are per tenant, so one email may be a user of several: the password is checked
        against each, and if it is right for more than one the person chooses (``account``, the
        tenant's name). Attempts are limited per address and per (email, address); the latter is
        cleared by a success, and a stranger at another address never uses up the owner's."""
        email = email.strip().lower()
        where = client_address(address)
        s_ = self._settings
        await self._limiter.hit(Limit("signin-address", s_.signin_limit_per_address), where, what="sign-in attempts")
        per_account = Limit("signin-account", s_.signin_limit_per_account)
        await self._limiter.hit(per_account, email, where, what="sign-in attempts for this email")
        async with self._db.unscoped() as s:
            candidates = await repo.find_users_by_email(s, email)
        if account:
            candidates = [c for c in candidates if c.tenant_name == account]
        matches, unverified = [], 0
        for c in candidates:
            if await secrets.verify_password(c.password_hash, password) and c.disabled_at is None:
                if c.email_verified:
                    matches.append(c)
                else:
                    unverified += 1
        if not candidates:
            await secrets.verify_password(None, password)  # an unknown email costs what a wrong password does
        if not matches and unverified:
            # Said only to someone who knows the password: nothing a stranger learns.
            raise LoginFailed("Verify your email address first: follow the link we sent when you signed up.")
        if not matches:
            raise LoginFailed("The email or password is not right, or the account is disabled.")
        if len(matches) > 1:
            raise ChooseAccount([m.tenant_name for m in matches])
        found = matches[0]
        await self._limiter.clear(per_account, email, where)
        return found

    async def _consent_view(
        self, req: AuthorizationRequest, ticket: str, tenant_id: uuid.UUID, user_id: uuid.UUID
    ) -> ConsentView:
        async with self._db.tenant_tx(tenant_id) as tx:
            user = await repo.get_user(tx.session, tenant_id, user_id)
            names = await repo.namespace_names(tx.session, tenant_id)
        assert user is not None
        # Only what the user may share is offered.
        names = [n for n in names if user_principal(tenant_id, user).can_access(n)]
        scopes = [s for s in req.scopes if s in user.scopes]
        default = ["default"] if "default" in names else names[:1]
        return ConsentView(req, ticket, user.email, scopes, names, default)

    async def _ticket(self, req: AuthorizationRequest, ticket: str) -> tuple[uuid.UUID, uuid.UUID, str, datetime]:
        try:
            claims = await self._verified(
                ticket,
                LOGIN_TICKET_TYP,
                {
                    "iss": self.oauth_issuer,
                    "aud": self._endpoint("/oauth/authorize"),
                    "req": req.fingerprint(),
                    "tid": None,
                    "sub": None,
                    "jti": None,
                },
            )
            expires = datetime.fromtimestamp(int(claims["exp"]), UTC)
            return uuid.UUID(claims["tid"]), uuid.UUID(claims["sub"]), str(claims["jti"]), expires
        except (JoseError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise LoginFailed("The sign-in has expired or does not belong to this request; sign in again.") from exc

    async def answer_consent(
        self,
        req: AuthorizationRequest,
        ticket: str,
        *,
        allow: bool,
        namespaces: list[str],
        scopes: list[str],
    ) -> str:
        """The user's answer on the consent page. Returns where to send the browser: the client's
        redirect URI with a code (or access_denied), `state` and `iss` (RFC 9207).

        The ticket answers once: a replay (the back button, or a copy of the page) must sign in
        again. A mistake on the page (ConsentInvalid) rolls the spending back, so it can be fixed."""
        tenant_id, user_id, ticket_id, ticket_expires = await self._ticket(req, ticket)
        spent = LoginFailed("This sign-in was already used; sign in again.")
        if not allow:
            async with self._db.tenant_tx(tenant_id) as tx:
                if not await repo.spend_ticket(tx.session, tenant_id, ticket_id, ticket_expires):
                    raise spent
            return with_params(
                req.redirect_uri,
                {
                    "error": "access_denied",
                    "error_description": "The user declined.",
                    "state": req.state,
                    "iss": self.oauth_issuer,
                },
            )
        code = secrets.new_code()
        async with self._db.tenant_tx(tenant_id) as tx:
            if not await repo.spend_ticket(tx.session, tenant_id, ticket_id, ticket_expires):
                raise spent
            user = await repo.get_user(tx.session, tenant_id, user_id)
            if user is None or user.disabled_at is not None:
                raise LoginFailed("This account is disabled.")
            known = set(await repo.namespace_names(tx.session, tenant_id))
            chosen = list(dict.fromkeys(namespaces))
            if not chosen:
                raise ConsentInvalid("Choose at least one namespace to share.")
            # The user can share only what they may reach (a user made by a namespace-limited
            # key reaches only its namespaces). Another tenant's namespace, or one outside the
            # user's reach, looks exactly like one that does not exist.
            reach = user_principal(tenant_id, user)
            missing = [n for n in chosen if n not in known or not reach.can_access(n)]
            if missing:
                raise ConsentInvalid(f"No namespace named {missing[0]!r} in your account.")
            # A scope the user's role lacks (act_as for a member) is dropped, as the page never offered it.
            granted = [s for s in OAUTH_SCOPES if s in scopes and s in req.scopes and s in user.scopes]
            # act_as alone opens no memory: a grant needs read or write beside it.
            if not set(granted) & set(DEFAULT_OAUTH_SCOPES):
                raise ConsentInvalid("Choose at least one permission to grant.")
            await repo.insert_code(
                tx.session,
                tenant_id,
                code_hash=secrets.digest(code),
                user_id=user_id,
                client_id=req.client_id,
                redirect_uri=req.redirect_uri,
                code_challenge=req.code_challenge,
                scopes=granted,
                namespaces=chosen,
                resource=req.resource,
                expires_at=datetime.now(UTC) + timedelta(seconds=self._settings.oauth_code_ttl_s),
            )
        return with_params(req.redirect_uri, {"code": code, "state": req.state, "iss": self.oauth_issuer})

    async def consent_view(self, req: AuthorizationRequest, ticket: str) -> ConsentView:
        """The consent page again (after a mistake on it), for the signed-in user of the ticket."""
        tenant_id, user_id, _, _ = await self._ticket(req, ticket)
        return await self._consent_view(req, ticket, tenant_id, user_id)
