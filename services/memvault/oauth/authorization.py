"""An authorization request as checked, what the consent page shows, and the answers the
sign-in pages give (errors sent back to the client, failed sign-ins, a consent to fix)."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

from memvault.oauth.errors import InvalidScope, OAuthError
from memvault.oauth.schemas import DEFAULT_OAUTH_SCOPES, OAUTH_SCOPES
from memvault.principal import Principal


class RedirectError(OAuthError):
    """An authorization error reported to the client at its (already verified) redirect URI."""

    def __init__(self, inner: OAuthError, redirect_uri: str, state: str | None, issuer: str) -> None:
        super().__init__(inner.detail)
        self.error = inner.error  # type: ignore[misc]
        self.location = with_params(
            redirect_uri, {"error": inner.error, "error_description": inner.detail, "state": state, "iss": issuer}
        )


class LoginFailed(OAuthError):
    status = 401
    code = "oauth_login_failed"
    title = "Sign-in failed"
    error = "access_denied"


class ConsentInvalid(OAuthError):
    code = "oauth_consent_invalid"
    title = "Consent not understood"


class ChooseAccount(OAuthError):
    """The password is right for this email in several tenants: the person picks one."""

    code = "oauth_choose_account"
    title = "Choose an account"

    def __init__(self, accounts: list[str]) -> None:
        super().__init__("This email signs in to several accounts. Choose one and enter the password again.")
        self.accounts = accounts


def user_principal(tenant_id: uuid.UUID, user: Any) -> Principal:
    """What a tenant user may share with a client: consent is limited by it like any other act."""
    return Principal(
        tenant_id=tenant_id,
        scopes=frozenset(user.scopes),
        subject=f"user:{user.id}",
        namespaces=None if user.namespaces is None else frozenset(user.namespaces),
    )


def with_params(uri: str, params: dict[str, str | None]) -> str:
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return f"{uri}{'&' if urlsplit(uri).query else '?'}{query}"


@dataclass(frozen=True)
class AuthorizationRequest:
    """A checked request to /oauth/authorize; the pages carry it along as hidden fields."""

    client_id: str
    client_name: str | None
    redirect_uri: str
    state: str | None
    code_challenge: str
    scopes: tuple[str, ...]
    resource: str

    def fields(self) -> dict[str, str]:
        """The request as the client sent it, to be re-submitted (and re-checked) by the forms."""
        out = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": self.redirect_uri,
            "code_challenge": self.code_challenge,
            "code_challenge_method": "S256",
            "scope": " ".join(self.scopes),
            "resource": self.resource,
        }
        if self.state is not None:
            out["state"] = self.state
        return out

    def fingerprint(self) -> str:
        """Binds a login ticket to this exact request: it cannot be replayed for another client."""
        return hashlib.sha256(json.dumps(self.fields(), sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class ConsentView:
    request: AuthorizationRequest
    ticket: str
    user_email: str
    scopes: list[str]
    namespaces: list[str]
    checked_namespaces: list[str] = field(default_factory=list)


def scopes_of(raw: str | None) -> tuple[str, ...]:
    if not raw:
        return DEFAULT_OAUTH_SCOPES
    # offline_access is how some clients ask for a refresh token; every grant gets one anyway.
    wanted = [s for s in dict.fromkeys(raw.split()) if s != "offline_access"]
    unknown = [s for s in wanted if s not in OAUTH_SCOPES]
    if unknown:
        raise InvalidScope(f"Unknown scope(s): {' '.join(unknown)}. Supported: {' '.join(OAUTH_SCOPES)}.")
    return tuple(wanted) or DEFAULT_OAUTH_SCOPES
