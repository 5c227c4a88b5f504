"""The certificate authorities every TLS connection of the collector trusts: the collectors' requests (verify=),
the sinks' pools (ca_certs / ca_cert_dir) and any other client of the process, resolved once.

CA_BUNDLE names a PEM file or a directory of hashed certificates (`openssl rehash`); empty, the first of the
conventional variables that is set names it (REQUESTS_CA_BUNDLE, SSL_CERT_FILE, SSL_CERT_DIR); none set, each
client keeps its default authorities. A path that does not exist, cannot be read or holds no certificate is a
settings error (at start, exit 2; at a reload, the reload is refused).
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

SOURCES = ("CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")  # the first set wins
DEFAULT = "(empty: the default authorities)"


@dataclass(frozen=True)
class Authorities:
    """A path to trust and the setting or variable that named it ("" and "": the default authorities)."""

    path: str = ""
    source: str = ""

    def shown(self) -> str:
        """As `--check-config` shows it: the path and where it came from."""
        return f"{self.path} (from {self.source})" if self.path else DEFAULT


def authorities(environ: Mapping[str, str]) -> Authorities:
    """Pure: the authorities `environ` (the merged settings) names, CA_BUNDLE first, then the conventional
    variables in their order; a value of spaces is no value."""
    for name in SOURCES:
        value = environ.get(name)
        if isinstance(value, str) and value.strip():
            return Authorities(value.strip(), name)
    return Authorities()


def unusable(path: str) -> str:
    """What makes `path` unusable as authorities to trust ("" when nothing does): a file must be readable and hold
    at least one PEM certificate, a directory must be readable. Loading a bundle costs a tenth of a second, and
    settings are read at every start, reload and command: the verdict is kept while the path's inode, size, mode
    and modification time stay the same."""
    try:
        found = os.stat(path)
    except (OSError, ValueError):
        return _unusable(path, None)
    return _unusable(path, (found.st_dev, found.st_ino, found.st_size, found.st_mode, found.st_mtime_ns))


@functools.lru_cache(maxsize=16)
def _unusable(path: str, identity: tuple[int, ...] | None) -> str:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        if os.path.isdir(path):
            if not os.access(path, os.R_OK | os.X_OK):
                return "is a directory that cannot be read"
            context.load_verify_locations(capath=path)
            return ""
        if not os.path.exists(path):
            return "does not exist"
        if not os.path.isfile(path):
            return "is neither a file nor a directory"
        context.load_verify_locations(cafile=path)
    except ssl.SSLError:
        return "holds no PEM certificate"
    except (OSError, ValueError):
        return "cannot be read"
    return ""


def pool_options(path: str) -> dict[str, str]:
    """urllib3's pool options for trusting `path` ({} for the default authorities)."""
    if not path:
        return {}
    return {"ca_cert_dir": path} if os.path.isdir(path) else {"ca_certs": path}
