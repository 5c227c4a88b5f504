"""Which addresses a collector may connect to, and checks for API base URLs that come from users (a Mastodon
instance, a Bluesky PDS).

Two layers. `safe_base_url` checks a user-supplied URL before any request: https only, no credentials or query,
and (unless ALLOW_PRIVATE_HOSTS) a host that resolves to public addresses only. The second layer is in the
connection itself (net/connections.py, under net/addresses.py's `Policy`): every socket the collector opens to a host
that is not one of its configured API hosts is checked at the address actually connected to, for every redirect
hop too, so DNS rebinding and redirects to internal addresses are refused.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from urllib.parse import urlsplit

from ..net.addresses import Policy, is_public
from .errors import Malformed, Transient

__all__ = ["Policy", "Resolver", "is_public", "resolve", "safe_base_url"]

Resolver = Callable[[str], list[str]]


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
