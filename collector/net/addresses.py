"""Which addresses may be connected to: `is_public` judges one address, `Policy` says whose connections are
checked (connections.py checks them at the address actually connected to)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

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


def literal_address(host: str) -> bool:
    """Whether a URL's host is an IP address literal (with or without an IPv6 zone)."""
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Policy:
    """Whose connections are checked by address: every host but the configured API hosts (`trusted_hosts`), unless
    private addresses are allowed (ALLOW_PRIVATE_HOSTS)."""

    allow_private: bool
    trusted_hosts: frozenset[str]

    def must_check(self, host: str | None) -> bool:
        return not self.allow_private and (host or "").lower().strip("[]") not in self.trusted_hosts
