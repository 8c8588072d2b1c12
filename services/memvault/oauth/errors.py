"""OAuth failures. The OAuth endpoints answer them in RFC 6749 form (`error`, `error_description`);
the REST and MCP front doors see ordinary MemvaultErrors with stable codes."""

from __future__ import annotations

from typing import Any, ClassVar

from memvault.errors import Conflict, InvalidInput, MemvaultError, NotFound, Unauthenticated


class OAuthError(MemvaultError):
    """`error` is the RFC 6749 / 7591 / 8707 error code sent to OAuth clients."""

    error: ClassVar[str] = "invalid_request"

    def oauth_body(self) -> dict[str, Any]:
        return {"error": self.error, "error_description": self.detail}


class InvalidRequest(OAuthError):
    code = "oauth_invalid_request"
    title = "Invalid OAuth request"
    error = "invalid_request"


class InvalidClient(OAuthError):
    status = 401
    code = "oauth_invalid_client"
    title = "Unknown OAuth client"
    error = "invalid_client"


class UnknownClient(OAuthError):
    """At the authorization endpoint: the client cannot be identified, so nothing is redirected."""

    code = "oauth_unknown_client"
    title = "Unknown OAuth client"
    error = "invalid_client"


class InvalidGrant(OAuthError):
    code = "oauth_invalid_grant"
    title = "Invalid grant"
    error = "invalid_grant"


class UnsupportedGrantType(OAuthError):
    code = "oauth_unsupported_grant_type"
    title = "Unsupported grant type"
    error = "unsupported_grant_type"


class InvalidScope(OAuthError):
    code = "oauth_invalid_scope"
    title = "Invalid scope"
    error = "invalid_scope"


class InvalidTarget(OAuthError):
    code = "oauth_invalid_target"
    title = "Invalid resource"
    error = "invalid_target"


class InvalidClientMetadata(OAuthError):
    code = "oauth_invalid_client_metadata"
    title = "Invalid client metadata"
    error = "invalid_client_metadata"


class InvalidRedirectUri(OAuthError):
    code = "oauth_invalid_redirect_uri"
    title = "Invalid redirect URI"
    error = "invalid_redirect_uri"


class AccessDenied(OAuthError):
    status = 403
    code = "oauth_access_denied"
    title = "Access denied"
    error = "access_denied"


class InvalidAccessToken(Unauthenticated):
    code = "invalid_token"
    title = "Invalid access token"


class UserExists(Conflict):
    code = "user_exists"
    title = "User exists"


class UserNotFound(NotFound):
    code = "user_not_found"
    title = "User not found"


class GrantNotFound(NotFound):
    code = "grant_not_found"
    title = "Grant not found"


class WeakPassword(InvalidInput):
    code = "weak_password"
    title = "Password too short"
