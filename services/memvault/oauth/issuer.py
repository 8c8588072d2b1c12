"""IssuerOps: what every OAuth flow here stands on. Who we are (the issuer, the MCP resource, their
RFC 8414 / RFC 9728 metadata), the keys we sign with (JWKS, rotation, checking a token we signed),
the rate limiter of the public endpoints, and which clients exist (RFC 7591 registration, client ID
metadata documents). Sign-in and consent (signin.py), tokens (tokens.py) and signed links
(members/links.py) build on it.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from joserfc import jwt
from joserfc.jwt import JWTClaimsRegistry

from memvault.facade import FacadeBase
from memvault.oauth import clients
from memvault.oauth import repository as repo
from memvault.oauth.errors import UnknownClient
from memvault.oauth.keys import ALG, KeyRing, kid_of
from memvault.oauth.models import OAuthClient
from memvault.oauth.schemas import OAUTH_SCOPES
from memvault.ratelimit import Limit, RateLimiter, client_address

# A metadata document is re-fetched when our copy is older than this.
CIMD_REFRESH = timedelta(hours=1)
# Tolerated clock difference between the replica that signed a token and the one checking it.
LEEWAY_S = 5


class IssuerOps(FacadeBase):
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

    # ---- tokens we signed --------------------------------------------------------------------------

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
