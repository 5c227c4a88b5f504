"""Which addresses a collector may connect to, and checks for API base URLs that come from users (a Mastodon
instance, a Bluesky PDS).

Two layers. `safe_base_url` checks a user-supplied URL before any request: https only, no credentials or query,
and (unless ALLOW_PRIVATE_HOSTS) a host that resolves to public addresses only. The second layer is in the
connection itself (sdk/_connections.py, under the `Policy` below): every socket the collector opens to a host
that is not one of its configured API hosts is checked at the address actually connected to, for every redirect
hop too, so DNS rebinding and redirects to internal addresses are refused.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from .errors import Malformed, Transient

Resolver = Callable[[str], list[str]]

# Ranges Python's `is_global` counts as global but that lead inside (translation to IPv4 of any kind) or that
# older Pythons misjudge. IPv4-mapped and -compatible addresses are judged by the IPv4 address they carry.
_NOT_PUBLIC = tuple(
    ipaddress.ip_network(net)
    for net in (
        "64:ff9b::/96",  # NAT64 well-known prefix
        "64:ff9b:1::/48",  # NAT64 local-use prefix
        "2002::/16",  # 6to4
        "2001::/32",  # Teredo
        "100.64.0.0/10",  # CGNAT shared address space
        "192.0.0.0/24",  # IETF protocol assignments
        "198.18.0.0/15",  # benchmarking
    )
)


def is_public(address: str) -> bool:
    """Whether an IP address (text, with or without an IPv6 zone) is a public unicast address."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return is_public(str(ip.ipv4_mapped))
        if ip.sixtofour is not None or ip.teredo is not None:
            return False
    if any(ip in net for net in _NOT_PUBLIC if net.version == ip.version):
        return False
    return ip.is_global and not ip.is_multicast


@dataclass(frozen=True)
class Policy:
    """Whose connections are checked by address: every host but the configured API hosts (`trusted_hosts`), unless
    private addresses are allowed (ALLOW_PRIVATE_HOSTS)."""

    allow_private: bool
    trusted_hosts: frozenset[str]

    def must_check(self, host: str | None) -> bool:
        return not self.allow_private and (host or "").lower().strip("[]") not in self.trusted_hosts


def resolve(host: str) -> list[str]:
    try:
        return sorted({str(info[4][0]) for info in socket.getaddrinfo(host, 443, proto=socket.IPPROTO_TCP)})
    except (socket.gaierror, UnicodeError):
        raise Transient(f"cannot resolve host {host!r}") from None


def safe_base_url(url: object, field: str, allow_private: bool, resolver: Resolver | None = None) -> str:
    """The URL without a trailing slash, or Malformed naming the field and the reason."""
    if not isinstance(url, str) or not url or len(url) > 2048:
        raise Malformed(f"field {field!r} must be an https URL")
    try:
        parts = urlsplit(url)
        hostname, port = parts.hostname, parts.port
    except ValueError:
        raise Malformed(f"field {field!r} is not a valid URL") from None
    if parts.scheme != "https" or not hostname:
        raise Malformed(f"field {field!r} must be an https URL, got scheme {parts.scheme or 'none'!r}")
    if parts.username or parts.password or parts.query or parts.fragment or any(c.isspace() for c in url):
        raise Malformed(f"field {field!r} must be a plain https://host URL")
    del port  # checked for validity only
    if not allow_private:
        for address in (resolver or resolve)(hostname):
            if not is_public(address):
                raise Malformed(
                    f"field {field!r}: host {hostname!r} resolves to a non-public address "
                    f"({address}); set ALLOW_PRIVATE_HOSTS=true to allow it"
                )
    return url.rstrip("/")
