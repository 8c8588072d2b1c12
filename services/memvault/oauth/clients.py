"""Which clients may ask for a sign-in, and where the answer may be sent.

Two ways in: dynamic client registration (RFC 7591) of public clients, and client ID metadata
documents (a `client_id` that is an HTTPS URL whose JSON we fetch). Redirect URIs follow RFC 8252
for native apps and RFC 9700: a loopback `http` URI matches on any port (Claude Code and
mcp-remote pick a random one); a private-use scheme in reverse-domain form (`com.example.app:/cb`)
and an `https` URI must match exactly. No URI carries userinfo or a fragment.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import re
import socket
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from pydantic import ValidationError

from memvault.fields import as_error, check_value
from memvault.oauth.errors import InvalidClientMetadata, InvalidRedirectUri, UnknownClient
from memvault.oauth.schemas import ClientMetadataIn

LOOPBACK_HOSTS = {"127.0.0.1", "[::1]", "::1", "localhost"}
# Schemes a browser must never be sent to with a code in hand. None of them is in reverse-domain form,
# so the rule below refuses them anyway; the list names them for the error message and for review.
FORBIDDEN_SCHEMES = {
    "javascript", "data", "file", "vbscript", "about", "blob", "ftp", "ws", "wss",
    "view-source", "mailto", "filesystem", "tel", "sms", "intent", "chrome", "resource",
}  # fmt: skip
# RFC 8252 §7.1: a private-use scheme is a reversed domain name the app's owner controls
# (`com.example.app`), at least two labels, so it cannot be a browser's or the OS's own scheme.
PRIVATE_USE_SCHEME = re.compile(r"[a-z][a-z0-9-]*(\.[a-z0-9-]+)+")
GRANT_TYPES = {"authorization_code", "refresh_token"}
MAX_REDIRECT_URIS = 10
# Client metadata is a flat object of strings and lists of strings; nothing legitimate nests deeper.
MAX_METADATA_DEPTH = 8
MAX_URI_LENGTH = 2000

CIMD_TIMEOUT_S = 5.0
CIMD_MAX_BYTES = 64 * 1024


def _is_loopback(host: str | None) -> bool:
    return (host or "").lower() in LOOPBACK_HOSTS


def check_redirect_uri(uri: str, *, extra_schemes: Collection[str] = ()) -> str:
    """A redirect URI a client may register: absolute, no fragment, https, loopback http, or a
    private-use scheme (RFC 8252 §7.1)."""
    if not isinstance(uri, str) or not uri or len(uri) > MAX_URI_LENGTH:
        raise InvalidRedirectUri("Each redirect URI must be a non-empty string of at most 2000 characters.")
    if any(c.isspace() or ord(c) < 0x20 or c == "\\" for c in uri):
        raise InvalidRedirectUri("A redirect URI contains no spaces, control characters or backslashes.")
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if not scheme or parts.fragment or "#" in uri:
        raise InvalidRedirectUri(f"Redirect URI {uri!r} must be absolute and carry no fragment.")
    if scheme in FORBIDDEN_SCHEMES:
        raise InvalidRedirectUri(f"Redirect URI scheme {scheme!r} is not allowed.")
    if "@" in parts.netloc:
        # `https://claude.ai@evil.example/` goes to evil.example (RFC 9700 §4.1.3).
        raise InvalidRedirectUri(f"Redirect URI {uri!r} carries userinfo (a user@ part); that is not allowed.")
    if scheme in ("http", "https"):
        if not parts.hostname:
            raise InvalidRedirectUri(f"Redirect URI {uri!r} has no host.")
        try:
            port = parts.port
        except ValueError as exc:
            raise InvalidRedirectUri(f"Redirect URI {uri!r} has an impossible port.") from exc
        if port == 0:
            raise InvalidRedirectUri(f"Redirect URI {uri!r} has an impossible port.")
        if scheme == "http" and not _is_loopback(parts.hostname):
            raise InvalidRedirectUri(f"Redirect URI {uri!r}: plain http is allowed only to a loopback address.")
    elif not PRIVATE_USE_SCHEME.fullmatch(scheme) and scheme not in extra_schemes:
        raise InvalidRedirectUri(
            f"Redirect URI scheme {scheme!r}: an app's own scheme must be a reversed domain name "
            "it controls, e.g. com.example.app:/callback (RFC 8252 §7.1)."
        )
    return uri


def _without_port(uri: str) -> str:
    parts = urlsplit(uri)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return urlunsplit((parts.scheme.lower(), host.lower(), parts.path or "/", parts.query, ""))


def redirect_matches(requested: str, registered: list[str], *, extra_schemes: Collection[str] = ()) -> bool:
    """Exact match, except that a loopback http URI may use any port (RFC 8252 §7.3). The
    requested URI must itself be one that could be registered: the port exception must not let a
    fragment, userinfo or an impossible port through."""
    try:
        check_redirect_uri(requested, extra_schemes=extra_schemes)
    except InvalidRedirectUri:
        return False
    if requested in registered:
        return True
    parts = urlsplit(requested)
    if parts.scheme.lower() != "http" or not _is_loopback(parts.hostname):
        return False
    return any(
        urlsplit(r).scheme.lower() == "http" and _without_port(r) == _without_port(requested) for r in registered
    )


@dataclass(frozen=True)
class ClientRecord:
    client_id: str
    kind: str
    client_name: str | None
    redirect_uris: list[str]
    grant_types: list[str]
    scope: str | None
    metadata: dict[str, Any]


def parse_registration(raw: bytes) -> dict[str, Any]:
    """The one parser of a registration body (RFC 7591 §3.1): JSON text that PostgreSQL can store.
    A lone surrogate or a NUL anywhere (either fails the jsonb insert), nesting deeper than client
    metadata ever needs, or JSON too deep for the parser itself are a 400, never a 500."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise InvalidClientMetadata("The body must be a JSON object.") from exc
    try:
        check_value(body, max_depth=MAX_METADATA_DEPTH)  # the text rule every stored string passes
    except ValueError as exc:
        raise InvalidClientMetadata(f"Client metadata {exc}.") from exc
    if not isinstance(body, dict):
        raise InvalidClientMetadata("The registration body must be a JSON object.")
    return body


def validate_metadata(
    body: Any, *, client_id: str | None = None, extra_schemes: Collection[str] = ()
) -> dict[str, Any]:
    """RFC 7591 metadata of a public client, normalised; raises invalid_client_metadata /
    invalid_redirect_uri. Confidential-client methods are replaced by `none` (§3.2.1 lets the
    server substitute): memvault issues no client secrets."""
    if not isinstance(body, dict):
        raise InvalidClientMetadata("The registration body must be a JSON object.")
    uris = body.get("redirect_uris")
    if not isinstance(uris, list) or not uris or len(uris) > MAX_REDIRECT_URIS:
        raise InvalidRedirectUri(f"redirect_uris must list 1 to {MAX_REDIRECT_URIS} URIs.")
    uris = [check_redirect_uri(u, extra_schemes=extra_schemes) for u in uris]
    grant_types = body.get("grant_types") or ["authorization_code", "refresh_token"]
    valid = isinstance(grant_types, list) and all(isinstance(g, str) and g in GRANT_TYPES for g in grant_types)
    if not valid or "authorization_code" not in grant_types:
        raise InvalidClientMetadata("grant_types may only be authorization_code and refresh_token.")
    response_types = body.get("response_types") or ["code"]
    if response_types != ["code"]:
        raise InvalidClientMetadata("response_types must be ['code'].")
    name = body.get("client_name")
    if name is not None and (not isinstance(name, str) or len(name) > 200):
        raise InvalidClientMetadata("client_name must be a string of at most 200 characters.")
    scope = body.get("scope")
    if scope is not None and not isinstance(scope, str):
        raise InvalidClientMetadata("scope must be a space-separated string.")
    try:
        # The text rule, the secrets guard and size bounds of every request model (fields.Body).
        ClientMetadataIn.model_validate({k: v for k, v in body.items() if k in _KEPT})
    except ValidationError as exc:
        raise InvalidClientMetadata(as_error(exc).detail) from None
    kept = {k: v for k, v in body.items() if k in _KEPT and v is not None}
    out: dict[str, Any] = {
        **kept,
        "redirect_uris": uris,
        "grant_types": grant_types,
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    if client_id is not None:
        out["client_id"] = client_id
    return out


_KEPT = {
    "client_name",
    "client_uri",
    "logo_uri",
    "contacts",
    "tos_uri",
    "policy_uri",
    "software_id",
    "software_version",
    "scope",
    "application_type",
}


def is_metadata_url(client_id: str) -> bool:
    parts = urlsplit(client_id)
    return parts.scheme in ("https", "http") and bool(parts.hostname) and parts.path not in ("", "/")


def _public_address(ip: str) -> bool:
    addr = ipaddress.ip_address(ip.split("%")[0])
    return addr.is_global and not addr.is_multicast


async def fetch_metadata_document(
    client_id: str, *, allow_insecure: bool, extra_schemes: Collection[str] = ()
) -> dict[str, Any]:
    """GET the client ID metadata document, guarded against SSRF: https only, every address the
    host resolves to public (checked before connecting and again on the connected socket, so a
    DNS answer that changes in between does not help), no redirects, 5 s, 64 KiB."""
    parts = urlsplit(client_id)
    if parts.scheme != "https" and not allow_insecure:
        raise UnknownClient("A client ID metadata document must be served over https.")
    if parts.username or parts.password or parts.fragment:
        raise UnknownClient("A client ID URL carries no credentials or fragment.")
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise UnknownClient(f"The client ID host {host!r} does not resolve.") from exc
    if not allow_insecure and not all(_public_address(str(info[4][0])) for info in infos):
        raise UnknownClient("The client ID host resolves to a private address.")
    try:
        async with (
            httpx.AsyncClient(timeout=CIMD_TIMEOUT_S, follow_redirects=False, trust_env=False) as http,
            http.stream("GET", client_id, headers={"Accept": "application/json"}) as r,
        ):
            stream = r.extensions.get("network_stream")
            peer = stream.get_extra_info("server_addr") if stream is not None else None
            if not allow_insecure and (peer is None or not _public_address(str(peer[0]))):
                raise UnknownClient("The client ID host resolved to a private address.")
            if r.status_code != 200:
                raise UnknownClient(f"The client ID metadata document answered HTTP {r.status_code}.")
            body = b""
            async for chunk in r.aiter_bytes():
                body += chunk
                if len(body) > CIMD_MAX_BYTES:
                    raise UnknownClient("The client ID metadata document is larger than 64 KiB.")
    except httpx.HTTPError as exc:
        raise UnknownClient(f"The client ID metadata document could not be fetched: {type(exc).__name__}.") from exc
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise UnknownClient("The client ID metadata document is not JSON.") from exc
    if not isinstance(doc, dict) or doc.get("client_id") != client_id:
        raise UnknownClient("The client ID metadata document must name its own URL as client_id.")
    if doc.get("token_endpoint_auth_method", "none") != "none" or "client_secret" in doc:
        raise UnknownClient("Only public clients (token_endpoint_auth_method 'none') are supported.")
    try:
        return validate_metadata(doc, client_id=client_id, extra_schemes=extra_schemes)
    except (InvalidClientMetadata, InvalidRedirectUri) as exc:
        raise UnknownClient(f"The client ID metadata document is invalid: {exc.detail}") from exc
