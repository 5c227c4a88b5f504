"""Checked connections: urllib3's connections and pools with the deadline watch (deadline.py) and the address
check (addresses.py's `Policy`) built in.

Every socket to a host that is not one of the collector's configured API hosts is checked at the address actually
connected to (no loopback, private, link-local or translated address unless ALLOW_PRIVATE_HOSTS), on every
redirect hop. A connected socket's settimeout() does nothing when the timeout is already that value, and its
response reader takes 64 KiB per read (`quiet_class`). An answer is its own request's: interim answers are skipped
and a connection is reused only after a clean exchange (answers.py).
"""

from __future__ import annotations

import socket
import time
from typing import Any

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util import connection as urllib3_connection

from .addresses import is_public
from .answers import Response
from .deadline import WATCH, Entry
from .errors import AddressRefused

READ_BUFFER = 64 * 1024  # bytes http.client's response reader takes per read (its default: 8 KiB)


def quiet_class(base: type[socket.socket]) -> type:
    """`base` (a socket class) whose settimeout() does nothing when the timeout is already that value: urllib3
    sets it twice per request, and each set is an ioctl() that gives the interpreter lock to another thread. Its
    response reader (makefile) reads up to 64 KiB at a time: a page that arrived whole (a 560 KB page is ~32 KB
    gzipped) is taken in by the read that finds its status line, not by a second read for the rest (every read
    is a system call that lets go of the lock, and under load getting it back costs up to a switch interval)."""

    def settimeout(self: socket.socket, value: Any) -> None:
        if (value is None or type(value) in (int, float)) and value == self.gettimeout():
            return
        base.settimeout(self, value)

    def makefile(self: socket.socket, mode: str = "r", buffering: int | None = None, **kwargs: Any) -> Any:
        if mode == "rb" and buffering is None:  # http.client's reader of a response
            buffering = READ_BUFFER
        return base.makefile(self, mode, buffering, **kwargs)  # type: ignore[call-overload]

    return type(
        f"Quiet{base.__name__}",
        (base,),
        {"__slots__": (), "settimeout": settimeout, "makefile": makefile, "quiet": True},
    )


_QUIET: dict[type, type] = {}


def quiet(sock: Any) -> None:
    """Give a connected socket (plain or TLS) the settimeout() of `quiet_class` (a subclass with no slots of its
    own: the object's layout is unchanged, so its class may be swapped)."""
    if isinstance(sock, socket.socket) and not getattr(sock, "quiet", False):
        kind = type(sock)
        sock.__class__ = _QUIET.get(kind) or _QUIET.setdefault(kind, quiet_class(kind))


class Checked:
    """Connection mix-in: the deadline watch, and the address check made before connecting. For a host the
    collector does not trust (a user-supplied instance, a redirect elsewhere), the name is resolved once, every
    address is checked, and a connection is opened only to an address that passed — so no TCP connection ever
    reaches a non-public address (no port-scan oracle: open and closed ports give the same refusal), and a name
    that answers a public address first and loopback next cannot rebind: the address checked is the address
    connected to. Behind a proxy the socket reaches the proxy; the check by address is the proxy's. Its answers
    are read by answers.py's `Response` (the classes below): interim answers skipped, bytes after an answer
    noticed."""

    host: str
    port: int
    proxy: Any
    sock: Any
    timeout: Any
    source_address: Any
    socket_options: Any

    def _new_conn(self) -> socket.socket:
        entry = WATCH.current()
        if entry is not None and not self.proxy and entry.policy.must_check(self.host):
            sock = self._connect_checked(entry)
        else:
            if entry is not None:  # the watch cannot cut a socket still connecting: no attempt outlives the deadline
                self.timeout = self._within(entry)
            sock = super()._new_conn()  # type: ignore[misc]
        WATCH.attach(self, sock)
        return sock

    def _within(self, entry: Entry) -> Any:
        """The connect timeout, cut to what is left of the request's deadline; ConnectTimeoutError when none is."""
        left = entry.deadline - time.monotonic()
        if left <= 0:
            raise ConnectTimeoutError(self, f"connection to {self.host}: the request's deadline passed")
        return min(self.timeout, left) if isinstance(self.timeout, (int, float)) else left

    def _connect_checked(self, entry: Entry) -> socket.socket:
        passed = self._public_addresses()
        error: Exception | None = None
        for _family, _type, _proto, _name, sockaddr in passed:  # a name may have dozens of addresses: one deadline
            try:
                return urllib3_connection.create_connection(
                    (str(sockaddr[0]), self.port),
                    self._within(entry),
                    source_address=self.source_address,
                    socket_options=self.socket_options,
                )
            except TimeoutError as exc:
                error = ConnectTimeoutError(self, f"connection to {self.host} timed out")
                error.__cause__ = exc
            except OSError as exc:
                error = NewConnectionError(self, f"failed to connect to {self.host}: {exc}")  # type: ignore[arg-type]
                error.__cause__ = exc
        assert error is not None
        raise error

    def _public_addresses(self) -> list[tuple]:
        """The host's addresses that passed the check (getaddrinfo's tuples); AddressRefused when none did."""
        host = getattr(self, "_dns_host", self.host)
        try:
            infos = socket.getaddrinfo(host, self.port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise NameResolutionError(self.host, self, exc) from exc  # type: ignore[arg-type]
        passed = [info for info in infos if is_public(str(info[4][0]))]
        if not passed:
            raise AddressRefused(f"connection to {self.host} refused: non-public address (ALLOW_PRIVATE_HOSTS is off)")
        return passed

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        quiet(self.sock)

    def request(self, *args: Any, **kwargs: Any) -> Any:
        if self.sock is not None:  # a pooled connection, reused: under this request's deadline now
            WATCH.attach(self, self.sock)
            if WATCH.current() is not None:
                self.timeout = None  # sent as its reads are read: bounded by the watch (deadline.py)
        return super().request(*args, **kwargs)  # type: ignore[misc]


class CheckedHTTPConnection(Checked, HTTPConnection):
    response_class = Response


class CheckedHTTPSConnection(Checked, HTTPSConnection):
    response_class = Response


class CheckedHTTPPool(HTTPConnectionPool):
    ConnectionCls = CheckedHTTPConnection


class CheckedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = CheckedHTTPSConnection


POOL_CLASSES = {"http": CheckedHTTPPool, "https": CheckedHTTPSPool}  # for urllib3's pool_classes_by_scheme
