"""Where a webhook may be sent: the SSRF guard, applied at delivery time.

A URL's host is resolved and refused if any of its addresses is loopback, private, link-local,
multicast, reserved, unspecified or a cloud metadata address (unless the operator allows private
targets, for local development and tests), and plain http is refused unless allowed the same way.
The sender then connects to the address that was checked, not to the name: a second DNS answer
(rebinding between the check and the connect) cannot move the request to an internal host. The
name still goes in the ``Host`` header and, for https, in the TLS SNI and certificate check
(httpcore's ``sni_hostname`` request extension).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Metadata services answer on these without being "private" in every table (fd00:ec2::254 is in
# the unique-local range, 169.254.169.254 link-local), named anyway so the rule reads explicitly.
METADATA = frozenset({ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")})


class AddressRefused(Exception):
    """The URL may not be called: the reason is recorded as the delivery's error."""


@dataclass(frozen=True)
class Target:
    """A checked destination: connect to ``address``, speak to ``host``."""

    url: str  # the URL with the checked address in place of the name
    host: str  # the name, for the Host header and SNI
    host_header: str  # host[:port] as the URL gave it
    address: str
    scheme: str


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


async def check(url: str, *, allow_private: bool) -> Target:
    """The destination to connect to for ``url``, or AddressRefused. Every address of the name
    is judged, not only the one used: a name with one public and one internal address is refused,
    since which one a resolver answers first is the attacker's to choose."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise AddressRefused(f"scheme {scheme!r} is not http(s)")
    if scheme == "http" and not allow_private:
        raise AddressRefused("plain http is refused; use https")
    host = parts.hostname
    if not host:
        raise AddressRefused("the URL has no host")
    if parts.username or parts.password:
        raise AddressRefused("credentials in the URL are refused")
    port = parts.port or (443 if scheme == "https" else 80)
    addresses = await resolve(host, port)
    if not allow_private:
        for address in addresses:
            reason = refused_reason(address)
            if reason is not None:
                raise AddressRefused(f"{host} resolves to {address}, {reason}")
    chosen = addresses[0]
    literal = f"[{chosen}]" if chosen.version == 6 else str(chosen)
    netloc = f"{literal}:{parts.port}" if parts.port else literal
    pinned = parts._replace(netloc=netloc).geturl()
    host_header = f"{host}:{parts.port}" if parts.port else host
    if ":" in host and not host.startswith("["):
        host_header = f"[{host}]:{parts.port}" if parts.port else f"[{host}]"
    return Target(url=pinned, host=host, host_header=host_header, address=str(chosen), scheme=scheme)
