"""TokenOps: the token endpoint (a code swapped with PKCE, a refresh token rotated on every use),
the check that turns an access token presented at /mcp into the same Principal an API key yields,
and revocation (RFC 7009).

A grant (the user's consent for a client) is the family of its refresh tokens: revoking it,
reusing a rotated refresh token or a spent code, and disabling the user all end it, and /mcp checks
that the grant is alive on every request, so a revoked grant's access tokens stop working at once
rather than at expiry.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError

from memvault.audit import repository as audit
from memvault.oauth import repository as repo
from memvault.oauth import secrets
from memvault.oauth.authorization import scopes_of
from memvault.oauth.errors import (
    InvalidAccessToken,
    InvalidClient,
    InvalidGrant,
    InvalidRequest,
    InvalidScope,
    InvalidTarget,
    OAuthError,
    UnsupportedGrantType,
)
from memvault.oauth.issuer import IssuerOps
from memvault.oauth.keys import ALG
from memvault.oauth.models import OAuthGrant
from memvault.oauth.schemas import OAUTH_SCOPES
from memvault.principal import Principal
from memvault.ratelimit import Limit, client_address

# A grant's last-used time is written at most this often (as an API key's), so each MCP request
# does not cost a write.
GRANT_USE_RESOLUTION = timedelta(seconds=60)
ACCESS_TOKEN_TYP = "at+jwt"  # RFC 9068


class TokenOps(IssuerOps):
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
