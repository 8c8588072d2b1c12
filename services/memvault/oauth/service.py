"""OAuthOps: memvault as the OAuth 2.1 authorization server of its tenants, and the check that
turns an access token presented at /mcp into the same Principal an API key yields.

Flow (docs/auth.md): a client discovers the metadata, registers (or names a metadata document),
sends the user to /oauth/authorize with PKCE S256 and `resource` = the MCP URL; the user signs in
and consents to scopes and namespaces; the client swaps the code for a short-lived JWT access token
and a refresh token that rotates on every use. A grant (the user's consent for that client) is the
family of those refresh tokens: revoking it, reusing a rotated refresh token or a spent code, and
disabling the user all end it, and /mcp checks that the grant is alive on every request, so a
revoked grant's access tokens stop working at once rather than at expiry.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwt import JWTClaimsRegistry

from memvault.audit import repository as audit
from memvault.facade import FacadeBase
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
from memvault.oauth.errors import (
    InvalidAccessToken,
    InvalidClient,
    InvalidGrant,
    InvalidRedirectUri,
    InvalidRequest,
    InvalidScope,
    InvalidTarget,
    OAuthError,
    UnknownClient,
    UnsupportedGrantType,
)
from memvault.oauth.keys import ALG, KeyRing, kid_of
from memvault.oauth.models import OAuthClient, OAuthGrant
from memvault.oauth.repository import FoundUser
from memvault.oauth.schemas import DEFAULT_OAUTH_SCOPES, OAUTH_SCOPES
from memvault.principal import Principal
from memvault.ratelimit import Limit, RateLimiter, client_address

# A metadata document is re-fetched when our copy is older than this.
CIMD_REFRESH = timedelta(hours=1)
# A grant's last-used time is written at most this often (as an API key's), so each MCP request
# does not cost a write.
GRANT_USE_RESOLUTION = timedelta(seconds=60)
ACCESS_TOKEN_TYP = "at+jwt"  # RFC 9068
LOGIN_TICKET_TYP = "memvault-login+jwt"
# Tolerated clock difference between the replica that signed a token and the one checking it.
LEEWAY_S = 5
MAX_STATE_LENGTH = 1024


class OAuthOps(FacadeBase):
    # ---- configuration and metadata ------------------------------------------------------------

    @property
    def _keyring(self) -> KeyRing:
        ring = self.__dict__.get("_oauth_keyring")
        if ring is None:
            ring = KeyRing(
                self._db,
                rotation_s=self._settings.oauth_key_rotation_s,
                # Also signs sign-up verification and invitation links (members/), which live longest.
                token_ttl_s=max(
                    self._settings.oauth_access_token_ttl_s,
                    self._settings.oauth_login_ttl_s,
                    self._settings.signup_verify_ttl_s,
                    self._settings.invitation_ttl_s,
                ),
            )
            self.__dict__["_oauth_keyring"] = ring
        return ring

    @property
    def _limiter(self) -> RateLimiter:
        limiter = self.__dict__.get("_oauth_limiter")
        if limiter is None:
            limiter = RateLimiter(self._settings.redis_url)
            self.__dict__["_oauth_limiter"] = limiter
        return limiter

    @property
    def oauth_issuer(self) -> str:
        return self._settings.resolved_issuer()

    @property
    def mcp_resource(self) -> str:
        return self._settings.mcp_resource_url()

    def oauth_endpoint_base(self) -> str:
        """Where the sign-in pages are served: their forms' Origin."""
        return self._settings.resolved_public_url()

    def _endpoint(self, path: str) -> str:
        return f"{self._settings.resolved_public_url()}{path}"

    def protected_resource_metadata(self) -> dict[str, Any]:
        """RFC 9728 metadata of the /mcp endpoint."""
        return {
            "resource": self.mcp_resource,
            "authorization_servers": [self.oauth_issuer],
            "scopes_supported": list(OAUTH_SCOPES),
            "bearer_methods_supported": ["header"],
            "resource_name": "memvault",
            "resource_documentation": "https://memvault.dev/docs/mcp",
        }

    def authorization_server_metadata(self) -> dict[str, Any]:
        """RFC 8414 metadata. `issuer` is exactly the identifier tokens carry (no trailing slash)."""
        return {
            "issuer": self.oauth_issuer,
            "authorization_endpoint": self._endpoint("/oauth/authorize"),
            "token_endpoint": self._endpoint("/oauth/token"),
            "registration_endpoint": self._endpoint("/oauth/register"),
            "revocation_endpoint": self._endpoint("/oauth/revoke"),
            "jwks_uri": self._endpoint("/oauth/jwks.json"),
            "scopes_supported": list(OAUTH_SCOPES),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none"],
            "revocation_endpoint_auth_methods_supported": ["none"],
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": True,
            "client_id_metadata_document_supported": True,
        }

    async def jwks(self) -> dict[str, Any]:
        await self._keyring.signing_key()  # so the first client to look finds a key
        return await self._keyring.jwks()

    async def rotate_signing_key(self) -> str:
        """Make a new token-signing key at once (operator); older keys keep verifying until their tokens expire."""
        return await self._keyring.rotate()

    # ---- clients ---------------------------------------------------------------------------------

    async def register_client(self, body: Any, *, address: str | None = None) -> dict[str, Any]:
        """RFC 7591 registration of a public client. No secret is issued, and none is sent (not even null)."""
        limit = Limit("oauth-register", self._settings.oauth_register_limit)
        await self._limiter.hit(limit, client_address(address), what="client registrations")
        meta = clients.validate_metadata(body, extra_schemes=self._settings.oauth_extra_redirect_schemes)
        client_id = f"mvc_{uuid.uuid4().hex}"
        async with self._db.unscoped() as s:
            row = await repo.save_client(s, "dcr", client_id, meta)
        return {**meta, "client_id": row.client_id, "client_id_issued_at": int(row.created_at.timestamp())}

    async def _client(self, client_id: str) -> OAuthClient:
        async with self._db.unscoped() as s:
            row = await repo.get_client(s, client_id)
        if clients.is_metadata_url(client_id):
            fresh = row is not None and row.fetched_at is not None and datetime.now(UTC) - row.fetched_at < CIMD_REFRESH
            if not fresh:
                meta = await clients.fetch_metadata_document(
                    client_id,
                    allow_insecure=self._settings.oauth_cimd_allow_insecure,
                    extra_schemes=self._settings.oauth_extra_redirect_schemes,
                )
                async with self._db.unscoped() as s:
                    row = await repo.save_client(s, "cimd", client_id, meta)
        if row is None:
            raise UnknownClient(f"No client with id {client_id!r} is registered here.")
        return row

    # ---- authorization -----------------------------------------------------------------------------

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

    # ---- tokens --------------------------------------------------------------------------------------

    async def token(self, form: dict[str, str], *, address: str | None = None) -> dict[str, Any]:
        """The token endpoint: authorization_code (with PKCE) and refresh_token grants."""
        limit = Limit("oauth-token", self._settings.oauth_token_limit)
        await self._limiter.hit(limit, client_address(address), what="token requests")
        grant_type = form.get("grant_type")
        client_id = form.get("client_id") or ""
        if not client_id:
            raise InvalidClient("client_id is required (public clients identify themselves by it).")
        resource = form.get("resource")
        if resource is not None and resource.rstrip("/") != self.mcp_resource:
            raise InvalidTarget(f"This server issues tokens only for {self.mcp_resource}.")
        if grant_type == "authorization_code":
            return await self._exchange_code(form, client_id)
        if grant_type == "refresh_token":
            return await self._refresh(form, client_id)
        raise UnsupportedGrantType("grant_type must be authorization_code or refresh_token.")

    async def _exchange_code(self, form: dict[str, str], client_id: str) -> dict[str, Any]:
        code, verifier = form.get("code") or "", form.get("code_verifier") or ""
        if not code or not verifier:
            raise InvalidRequest("code and code_verifier are required.")
        code_hash = secrets.digest(code)
        async with self._db.unscoped() as s:
            tenant_id = await repo.code_tenant(s, code_hash)
        if tenant_id is None:
            raise InvalidGrant("The authorization code is not valid.")
        failure: OAuthError | None = None
        refresh = secrets.new_refresh_token()
        async with self._db.tenant_tx(tenant_id) as tx:
            row = await repo.lock_code(tx.session, tenant_id, code_hash)
            assert row is not None
            user = await repo.get_user(tx.session, tenant_id, row.user_id)
            if row.used_at is not None:
                # RFC 6749 §4.1.2: a code used twice may have been stolen; end what it granted.
                if row.grant_id is not None:
                    await self._revoke(tx, tenant_id, row.grant_id, "authorization_code_reused", "oauth")
                failure = InvalidGrant("The authorization code was already used; its grant is revoked.")
            elif row.expires_at < datetime.now(UTC):
                failure = InvalidGrant("The authorization code has expired.")
            elif row.client_id != client_id:
                failure = InvalidGrant("The authorization code was issued to another client.")
            elif form.get("redirect_uri") != row.redirect_uri:
                failure = InvalidGrant("redirect_uri differs from the one in the authorization request.")
            elif not secrets.pkce_matches(verifier, row.code_challenge):
                failure = InvalidGrant("The code_verifier does not match the code_challenge (PKCE).")
            elif user is None or user.disabled_at is not None:
                failure = InvalidGrant("The user's account is disabled.")
            if failure is not None:
                # A code is spent by any attempt: a failed one cannot be retried with other guesses.
                row.used_at = row.used_at or datetime.now(UTC)
            else:
                grant = await repo.create_grant(
                    tx.session,
                    tenant_id,
                    user_id=row.user_id,
                    client_id=row.client_id,
                    scopes=row.scopes,
                    namespaces=row.namespaces,
                    resource=row.resource,
                )
                row.used_at, row.grant_id = datetime.now(UTC), grant.id
                await repo.mark_client_granted(tx.session, row.client_id)
                await self._store_refresh(tx.session, tenant_id, grant.id, refresh)
                await audit.record(
                    tx.session,
                    tenant_id,
                    f"user:{row.user_id}",
                    "oauth.grant",
                    target_id=str(grant.id),
                    detail={"client_id": row.client_id, "scopes": row.scopes, "namespaces": row.namespaces},
                )
        if failure is not None:
            raise failure
        return await self._token_response(tenant_id, grant, grant.scopes, refresh)

    async def _refresh(self, form: dict[str, str], client_id: str) -> dict[str, Any]:
        presented = form.get("refresh_token") or ""
        token_hash = secrets.digest(presented)
        async with self._db.unscoped() as s:
            tenant_id = await repo.refresh_tenant(s, token_hash)
        if tenant_id is None:
            raise InvalidGrant("The refresh token is not valid.")
        failure: OAuthError | None = None
        refresh = secrets.new_refresh_token()
        async with self._db.tenant_tx(tenant_id) as tx:
            row = await repo.lock_refresh(tx.session, tenant_id, token_hash)
            assert row is not None
            grant = await repo.get_grant(tx.session, tenant_id, row.grant_id)
            assert grant is not None
            user = await repo.get_user(tx.session, tenant_id, grant.user_id)
            if grant.client_id != client_id:
                failure = InvalidGrant("The refresh token was issued to another client.")
            elif row.used_at is not None:
                # A rotated token came back: one of the two holders is not the client. End the family.
                await self._revoke(tx, tenant_id, grant.id, "refresh_token_reused", "oauth")
                failure = InvalidGrant("The refresh token was already used; its grant is revoked.")
            elif grant.revoked_at is not None or user is None or user.disabled_at is not None:
                failure = InvalidGrant("The grant has been revoked.")
            elif row.expires_at < datetime.now(UTC):
                failure = InvalidGrant("The refresh token has expired.")
            else:
                requested = set(scopes_of(form["scope"])) if form.get("scope") else set(grant.scopes)
                if not requested <= set(grant.scopes):
                    failure = InvalidScope("A refresh cannot widen the granted scopes.")
            if failure is None:
                await repo.mark_refresh_used(tx.session, tenant_id, row.id)
                await self._store_refresh(tx.session, tenant_id, grant.id, refresh)
                await repo.touch_grant(tx.session, tenant_id, grant.id)
        if failure is not None:
            raise failure
        # Never more than the user's role allows now (a demotion also revokes grants; this is the
        # second lock).
        scopes = [s for s in grant.scopes if s in requested and user is not None and s in user.scopes]
        return await self._token_response(tenant_id, grant, scopes, refresh)

    async def _store_refresh(self, s: Any, tenant_id: uuid.UUID, grant_id: uuid.UUID, refresh: str) -> None:
        expires = datetime.now(UTC) + timedelta(seconds=self._settings.oauth_refresh_token_ttl_s)
        await repo.insert_refresh(s, tenant_id, grant_id, secrets.digest(refresh), expires)

    async def _token_response(
        self, tenant_id: uuid.UUID, grant: OAuthGrant, scopes: list[str], refresh: str
    ) -> dict[str, Any]:
        ttl = self._settings.oauth_access_token_ttl_s
        now = int(time.time())
        claims = {
            "iss": self.oauth_issuer,
            "aud": self.mcp_resource,
            "sub": str(grant.user_id),
            "client_id": grant.client_id,
            "scope": " ".join(scopes),
            "tid": str(tenant_id),
            "ns": grant.namespaces,
            "gid": str(grant.id),
            "jti": uuid.uuid4().hex,
            "iat": now,
            "exp": now + ttl,
        }
        key = await self._keyring.signing_key()
        access = jwt.encode({"alg": ALG, "kid": key.kid, "typ": ACCESS_TOKEN_TYP}, claims, key, algorithms=[ALG])
        return {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": ttl,
            "refresh_token": refresh,
            "scope": " ".join(scopes),
        }

    async def _verified(self, raw: str, typ: str, claims: dict[str, Any]) -> dict[str, Any]:
        """Signature (with the key its `kid` names), `typ`, then the claims: `exp` always, and
        each of ``claims`` as required (essential) and, where given, equal to a value."""
        token = jwt.decode(raw, await self._keyring.verification_keys(kid_of(raw)), algorithms=[ALG])
        if token.header.get("typ") != typ:
            raise ValueError(f"not a {typ} token")
        options: dict[str, Any] = {"exp": {"essential": True}}
        for name, value in claims.items():
            options[name] = {"essential": True} if value is None else {"essential": True, "value": value}
        JWTClaimsRegistry(leeway=LEEWAY_S, **options).validate(token.claims)
        return token.claims

    async def _decode(self, raw: str) -> dict[str, Any]:
        """Signature, type, issuer, audience and expiry of an access token, or 401."""
        try:
            return await self._verified(
                raw,
                ACCESS_TOKEN_TYP,
                {"iss": self.oauth_issuer, "aud": self.mcp_resource, "tid": None, "gid": None, "sub": None},
            )
        except (JoseError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise InvalidAccessToken(_why(exc)) from exc

    async def authenticate_access_token(self, raw: str) -> Principal:
        """An OAuth access token presented at /mcp → the Principal it stands for (tenant, the
        consented namespaces and scopes), or 401. The grant must still be alive."""
        claims = await self._decode(raw)
        try:
            tenant_id, grant_id = uuid.UUID(claims["tid"]), uuid.UUID(claims["gid"])
            namespaces = [str(n) for n in claims.get("ns") or []]
            scopes = [s for s in str(claims.get("scope", "")).split() if s in OAUTH_SCOPES]
        except (ValueError, TypeError) as exc:
            raise InvalidAccessToken("The access token's claims are malformed.") from exc
        async with self._db.tenant_tx(tenant_id) as tx:
            live, last_used = await repo.grant_use(tx.session, tenant_id, grant_id)
            # The dashboard's "last used" of a connected app, written at most once a resolution.
            if live and (last_used is None or datetime.now(UTC) - last_used > GRANT_USE_RESOLUTION):
                await repo.touch_grant(tx.session, tenant_id, grant_id)
        if not live:
            raise InvalidAccessToken("The access token's grant has been revoked.")
        return Principal(
            tenant_id=tenant_id,
            scopes=frozenset(scopes),
            subject=f"user:{claims['sub']}",
            namespaces=frozenset(namespaces),
            default_namespace=namespaces[0] if namespaces else None,
            grant_id=grant_id,
            # The person who signed in: memory calls act as them (acting.py).
            user_id=str(claims["sub"]),
        )

    async def revoke_token(self, form: dict[str, str]) -> None:
        """RFC 7009. Either token type ends its whole grant. Unknown or foreign tokens are ignored
        (the answer is the same 200), so the endpoint tells nobody which tokens exist."""
        raw = form.get("token") or ""
        client_id = form.get("client_id")
        if not raw:
            raise InvalidRequest("token is required.")
        if raw.startswith(secrets.REFRESH_PREFIX):
            token_hash = secrets.digest(raw)
            async with self._db.unscoped() as s:
                tenant_id = await repo.refresh_tenant(s, token_hash)
            if tenant_id is None:
                return
            async with self._db.tenant_tx(tenant_id) as tx:
                row = await repo.lock_refresh(tx.session, tenant_id, token_hash)
                grant = await repo.get_grant(tx.session, tenant_id, row.grant_id) if row else None
                if grant is not None and (client_id is None or client_id == grant.client_id):
                    await self._revoke(tx, tenant_id, grant.id, "revoked_by_client", f"client:{grant.client_id}")
            return
        try:
            claims = await self._decode(raw)
        except InvalidAccessToken:
            return  # expired or not ours: nothing it could still do
        tenant_id, grant_id = uuid.UUID(claims["tid"]), uuid.UUID(claims["gid"])
        if client_id is not None and client_id != claims.get("client_id"):
            return
        async with self._db.tenant_tx(tenant_id) as tx:
            await self._revoke(tx, tenant_id, grant_id, "revoked_by_client", f"client:{claims.get('client_id')}")

    async def _revoke(self, tx: Any, tenant_id: uuid.UUID, grant_id: uuid.UUID, reason: str, actor: str) -> None:
        rows = await repo.revoke_grants(tx.session, tenant_id, grant_id=grant_id, reason=reason)
        if rows:
            await audit.record(
                tx.session, tenant_id, actor, "oauth.revoke", target_id=str(grant_id), detail={"reason": reason}
            )


def _why(exc: Exception) -> str:
    name = type(exc).__name__
    if name == "ExpiredTokenError":
        return "The access token has expired."
    if name == "BadSignatureError":
        return "The access token's signature is not valid."
    if name in ("InvalidClaimError", "MissingClaimError"):
        return f"The access token was not issued for this resource ({exc})."
    return "The access token is not valid."
