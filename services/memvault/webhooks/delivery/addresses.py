"""Where a webhook may be sent: the SSRF guard, applied at delivery time.

A URL's host is resolved and refused if any of its addresses is loopback, private, link-local,
multicast, reserved, unspecified or a cloud metadata address (unless the operator allows private
targets, for local development and tests), and plain http is refused unless allowed the same way.
The check runs inside the connect: the sender's HTTP transport has a network backend
(``GuardedBackend``) that resolves the name, judges every address, and opens the TCP connection
to the address it judged, so a second DNS answer (rebinding between a check and a connect) has no
moment to act in. The request keeps the name in its URL: the ``Host`` header, the TLS SNI and the
certificate check are the name's, and httpcore pools connections by name, so a connection
verified for one host is never reused for another that shares its address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import httpcore

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Metadata services answer on these without being "private" in every table (fd00:ec2::254 is in
# the unique-local range, 169.254.169.254 link-local), named anyway so the rule reads explicitly.
METADATA = frozenset({ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")})


class AddressRefused(Exception):
    """The URL may not be called: the reason is recorded as the delivery's error."""


def refused_reason(address: IPAddress) -> str | None:
    """Why a destination address is refused, or None when it is a public one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 is loopback too
    if address in METADATA:
        return "a cloud metadata address"
    for name in ("unspecified", "loopback", "link_local", "multicast", "private", "reserved"):  # narrowest first
        if getattr(address, f"is_{name}"):
            return f"a {name.replace('_', '-')} address"
    if not address.is_global:  # shared (100.64/10), documentation and other special ranges
        return "not a public address"
    return None


async def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address the name has (getaddrinfo, on a thread: it blocks)."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = await asyncio.to_thread(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise AddressRefused(f"cannot resolve {host}: {exc.strerror}") from exc
    # An IPv6 answer may carry a scope (fe80::1%eth0): the address alone is what is judged.
    found = {ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos}
    if not found:
        raise AddressRefused(f"{host} has no address")
    return sorted(found, key=lambda a: (a.version, int(a)))


def check_url(url: str, *, allow_private: bool) -> tuple[str, int]:
    """(host, port) of a URL the sender may call, judged on its shape alone: http(s), https
    unless private targets are allowed, a host, no credentials."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise AddressRefused(f"scheme {scheme!r} is not http(s)")
    if scheme == "http" and not allow_private:
        raise AddressRefused("plain http is refused; use https")
    if not parts.hostname:
        raise AddressRefused("the URL has no host")
    if parts.username or parts.password:
        raise AddressRefused("credentials in the URL are refused")
    return parts.hostname, parts.port or (443 if scheme == "https" else 80)


async def pinned_address(host: str, port: int, *, allow_private: bool) -> str:
    """The address to connect to for ``host``. Every address the name has is judged, not only the
    one used: a name with one public and one internal address is refused, since which one a
    resolver answers first is the attacker's to choose."""
    addresses = await resolve(host, port)
    if not allow_private:
        for address in addresses:
            reason = refused_reason(address)
            if reason is not None:
                raise AddressRefused(f"{host} resolves to {address}, {reason}")
    return str(addresses[0])


async def check(url: str, *, allow_private: bool) -> str:
    """The address a request to ``url`` would go to now, or AddressRefused: for a subscription's
    URL when it is given (the sender checks again at every connect)."""
    host, port = check_url(url, allow_private=allow_private)
    return await pinned_address(host, port, allow_private=allow_private)


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with the guard in its connect: each new connection goes to an
    address judged a moment before, on the same resolution. Unix sockets are refused."""

    def __init__(self, *, allow_private: bool) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._allow_private = allow_private

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        address = await pinned_address(host, port, allow_private=self._allow_private)
        return await self._inner.connect_tcp(
            address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise AddressRefused("unix sockets are refused")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)
