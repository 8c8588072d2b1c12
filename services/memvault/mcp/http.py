"""The remote MCP endpoint at /mcp: Streamable HTTP, stateless (any replica serves any request),
JSON responses, Host/Origin checked against DNS rebinding. The bearer credential is checked here,
before the MCP layer sees the request, and the Principal travels with the request to the tools.

A client picks its tool profile per connection: `/mcp/core`, `/mcp/extended`, or `?profile=` on
any of them (the query wins, so a bridge can ask for its profile whatever URL it was given);
plain `/mcp` serves MEMVAULT_MCP_PROFILE. One server per profile is built at start, each with its
own session manager, and every one of them is the same protected resource (one token serves all).
"""

from __future__ import annotations

from typing import get_args
from urllib.parse import parse_qs, urlsplit

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

from memvault.config import Settings
from memvault.errors import InvalidInput, MemvaultError
from memvault.gateway.credentials import authenticated
from memvault.gateway.deps import MissingCredentials
from memvault.gateway.middleware import send_problem
from memvault.keys.tokens import KEY_PREFIX
from memvault.mcp.runtime import PRINCIPAL_STATE, bind_principal, unbind_principal
from memvault.mcp.server import Profile

PROFILES: tuple[Profile, ...] = get_args(Profile)
# Served as given, with and without a trailing slash: some clients do not follow redirects.
PATHS = tuple(p for base in ("/mcp", *(f"/mcp/{name}" for name in PROFILES)) for p in (base, f"{base}/"))

LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost"]
LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """Requests must name this server (Host) and, from browsers, come from an allowed Origin; a
    malicious web page cannot reach a local memvault through the user's browser."""
    public = urlsplit(settings.resolved_public_url())
    origin = f"{public.scheme}://{public.netloc}"
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[public.netloc, *LOOPBACK_HOSTS, *settings.mcp_allowed_hosts],
        allowed_origins=[origin, *LOOPBACK_ORIGINS, *settings.mcp_allowed_origins],
    )


def mount(servers: dict[Profile, MCPServer], settings: Settings) -> MCPEndpoint:
    """Build the stateless session manager of each profile's server and the ASGI endpoint that
    serves them all. The app's lifespan runs every ``server.session_manager``."""
    for server in servers.values():
        server.streamable_http_app(
            streamable_http_path="/mcp",
            stateless_http=True,
            json_response=True,
            transport_security=transport_security(settings),
        )
    return MCPEndpoint(servers, default=settings.mcp_profile, challenge=challenge(settings))


def challenge(settings: Settings) -> str:
    """RFC 6750 / RFC 9728 challenge: where an MCP client given only the URL finds how to sign in."""
    metadata = f"{settings.resolved_public_url()}/.well-known/oauth-protected-resource/mcp"
    return f'Bearer realm="memvault", resource_metadata="{metadata}", scope="read write"'


class UnknownProfile(InvalidInput):
    title = "Unknown MCP profile"


class MCPEndpoint:
    """ASGI app for every path in PATHS; the path or `?profile=` picks the server."""

    def __init__(
        self,
        servers: dict[Profile, MCPServer],
        default: Profile = "core",
        challenge: str = 'Bearer realm="memvault"',
    ) -> None:
        self.servers = servers
        self.default = default
        self.challenge = challenge

    def server_for(self, scope: Scope) -> MCPServer:
        asked = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("profile")
        name = asked[-1] if asked else scope["path"].rstrip("/").rsplit("/", 1)[-1]
        if name == "mcp":
            name = self.default
        if name not in self.servers:
            raise UnknownProfile(f"Unknown MCP profile {name!r}; use one of: {', '.join(self.servers)}.")
        return self.servers[name]  # type: ignore[index]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        api = scope["app"].state.api
        try:
            server = self.server_for(scope)
        except MemvaultError as exc:
            await send_problem(scope, send, exc, [])
            return
        try:
            raw = _bearer(scope)
            # An API key (for clients that can send headers) or an OAuth access token minted for
            # this endpoint; either becomes the same kind of Principal.
            authenticate = api.authenticate if raw.startswith(KEY_PREFIX) else api.authenticate_access_token
            principal = await authenticated(api, scope, authenticate, raw)
        except MemvaultError as exc:
            await _challenge(scope, send, exc, self.challenge)
            return
        scope.setdefault("state", {})[PRINCIPAL_STATE] = principal
        token = bind_principal(principal)
        try:
            await server.session_manager.handle_request(scope, receive, send)
        finally:
            unbind_principal(token)


def _bearer(scope: Scope) -> str:
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise MissingCredentials("Send 'Authorization: Bearer <API key or OAuth access token>'.")
    return token.strip()


async def _challenge(scope: Scope, send: Send, exc: MemvaultError, base: str) -> None:
    headers: list[tuple[bytes, bytes]] = []
    # A 5xx means the credential could not be checked (the database away, say): no challenge, since
    # it may be valid; the client retries after the pause (Retry-After), as on the REST door.
    if exc.status < 500:
        error = "invalid_token" if exc.code != MissingCredentials.code else None
        headers.append((b"www-authenticate", (base + (f', error="{error}"' if error else "")).encode()))
    await send_problem(scope, send, exc, headers)
