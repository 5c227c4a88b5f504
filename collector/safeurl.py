"""Checks for API base URLs that come from users (a Mastodon instance, a Bluesky PDS): https only, and by
default no host that resolves to a loopback, private, link-local or otherwise internal address."""
from __future__ import annotations

import ipaddress
import socket
from typing import Callable
from urllib.parse import urlsplit

from .errors import Malformed, Transient

Resolver = Callable[[str], list[str]]


def resolve(host: str) -> list[str]:
    try:
        return sorted({info[4][0] for info in socket.getaddrinfo(host, 443, proto=socket.IPPROTO_TCP)})
    except socket.gaierror:
        raise Transient(f"cannot resolve host {host!r}") from None


def safe_base_url(url: object, field: str, allow_private: bool, resolver: Resolver | None = None) -> str:
    """The URL without a trailing slash, or Malformed naming the field and the reason."""
    if not isinstance(url, str) or not url:
        raise Malformed(f"field {field!r} must be an https URL")
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise Malformed(f"field {field!r} must be an https URL, got scheme {parts.scheme or 'none'!r}")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise Malformed(f"field {field!r} must be a plain https://host URL")
    if not allow_private:
        for address in (resolver or resolve)(parts.hostname):
            ip = ipaddress.ip_address(address.split("%", 1)[0])
            if not ip.is_global:
                raise Malformed(f"field {field!r}: host {parts.hostname!r} resolves to a non-public address "
                                f"({ip}); set ALLOW_PRIVATE_HOSTS=true to allow it")
    return url.rstrip("/")
