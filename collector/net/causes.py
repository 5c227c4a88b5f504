"""Why an exchange failed, in a few fixed words: `cause(exc)` walks the chain of a failed request's exception
(requests' and urllib3's wrappers, the ssl module's errors, the socket's) and names what went wrong:

- `certificate verify failed: <why>` (self-signed certificate, certificate has expired, hostname mismatch, ...)
- `TLS handshake failed: <why>`
- `proxy unreachable: <host:port> (<why>)`, `proxy refused the tunnel: <host:port>: <its status>`
- `name not resolved: <host>`, `connection refused`, `connection reset`, `connection closed without an answer`,
  `answer cut short`, `network unreachable`, `host unreachable`, `timed out`

or None when it names none of them (the caller keeps its own words). The text is the cause only: never a URL, a
query string or a proxy's credentials (a proxy is named by host and port, its refusal by status code and the
standard phrase), at most LIMIT characters, printable. Pure: it reads the exceptions' attributes and the ssl
module's own words (OpenSSL's fixed reasons), never a message as a whole (requests' messages hold the URL), so
nothing it cuts short holds a secret.
"""

from __future__ import annotations

import errno
import http.client
import socket
import ssl
from collections.abc import Iterator
from http import HTTPStatus
from typing import Any

import requests.exceptions as rq
import urllib3.exceptions as u3
from urllib3.util.ssl_match_hostname import CertificateError as Urllib3CertificateError

from ..textout import printable

__all__ = ["LIMIT", "cause"]

LIMIT = 200  # characters of a cause, at most
PART = 120  # characters of one reason inside it (an OpenSSL message, a host)
LINKS = 32  # exceptions looked at in one chain, at most (a chain may loop or be long)
HOSTNAME_MISMATCH = 62  # OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH
IP_MISMATCH = 64  # X509_V_ERR_IP_ADDRESS_MISMATCH
DEFAULT_PORTS = {"http": 80, "https": 443, "socks5": 1080, "socks5h": 1080, "socks4": 1080, "socks4a": 1080}


def cause(exc: BaseException | None, host: str | None = None) -> str | None:
    """The cause of the failed exchange that raised `exc` (see the module's text), or None. `host` is the name a
    failed look-up is reported for when the chain does not say it."""
    links = list(_chain(exc))
    text = _proxy(links) or _certificate(links) or _tls(links) or _name(links, host) or _basic(links)
    if text is None:
        return None
    return printable(text[:LIMIT])[:LIMIT]


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    """`exc` and every exception it holds, nearest first: urllib3's `reason`, exceptions among the arguments
    (requests wraps urllib3's that way), the cause and the context; each once, at most LINKS."""
    todo: list[Any] = [exc]
    seen: set[int] = set()
    while todo and len(seen) < LINKS:
        link = todo.pop(0)
        if not isinstance(link, BaseException) or id(link) in seen:
            continue
        seen.add(id(link))
        yield link
        todo += [getattr(link, "reason", None), *link.args, link.__cause__, link.__context__]


def _proxy(links: list[BaseException]) -> str | None:
    at = next((i for i, e in enumerate(links) if isinstance(e, (u3.ProxyError, rq.ProxyError))), None)
    if at is None:
        return None
    inner = links[at + 1 :]
    where = _proxy_address(links, inner)
    tunnel = next((e for e in inner if _tunnel_refused(e)), None)
    if tunnel is not None:
        return f"proxy refused the tunnel{f': {where}' if where else ''}: {_status(str(tunnel))}"
    why = _certificate(inner) or _tls(inner) or _name(inner, None) or _basic(inner)
    return f"proxy unreachable{f': {where}' if where else ''}{f' ({why})' if why else ''}"


def _status(refusal: str) -> str:
    """The status of a proxy's refusal as our own words: its code and the phrase RFC 9110 gives it, never the
    proxy's own phrase (a proxy may echo the credentials it was sent)."""
    code = refusal.partition(":")[2].strip()[:3]
    if not (code.isascii() and code.isdigit()):
        return "no status"
    try:
        return f"{code} {HTTPStatus(int(code)).phrase}"
    except ValueError:
        return code


def _tunnel_refused(exc: BaseException) -> bool:
    return type(exc) is OSError and str(exc).startswith("Tunnel connection failed:")


def _proxy_address(links: list[BaseException], inner: list[BaseException]) -> str:
    """host:port of the proxy: the pool's proxy setting (a URL whose credentials are never read), else the
    connection that failed under the proxy error (the connection to the proxy)."""
    for link in links:
        proxy = getattr(getattr(link, "pool", None), "proxy", None) if isinstance(link, u3.MaxRetryError) else None
        if proxy is not None and getattr(proxy, "host", None):
            port = proxy.port or DEFAULT_PORTS.get(str(proxy.scheme or "http").lower(), 80)
            return _address(str(proxy.host), port)
    for link in inner:
        conn = getattr(link, "conn", None) if isinstance(link, u3.NewConnectionError) else None
        if conn is not None and getattr(conn, "host", None):
            return _address(str(conn.host), getattr(conn, "port", None))
    return ""


def _address(host: str, port: Any) -> str:
    host = _part(host.strip("[]"), 100)
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{port}" if isinstance(port, int) else host


def _certificate(links: list[BaseException]) -> str | None:
    for link in links:
        if isinstance(link, ssl.SSLCertVerificationError):
            code = getattr(link, "verify_code", None)
            if code == HOSTNAME_MISMATCH:
                return "certificate verify failed: hostname mismatch"
            if code == IP_MISMATCH:
                return "certificate verify failed: IP address mismatch"
            message = getattr(link, "verify_message", None)
            if isinstance(message, str) and message:
                return f"certificate verify failed: {_part(message)}"
            if "match" in str(link):  # ssl.match_hostname's own words
                return "certificate verify failed: hostname mismatch"
            return "certificate verify failed: " + (_ssl_reason(link) or "unknown reason")
        if isinstance(link, Urllib3CertificateError):
            return "certificate verify failed: hostname mismatch"
    return None


def _tls(links: list[BaseException]) -> str | None:
    wrappers = (u3.SSLError, rq.SSLError)
    if not any(isinstance(e, (ssl.SSLError, *wrappers)) for e in links):
        return None
    error = next((e for e in links if isinstance(e, ssl.SSLError)), None)
    if isinstance(error, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
        why = "connection closed during the handshake"
    elif error is not None:
        why = _ssl_reason(error) or "unknown reason"
    else:
        why = _basic([e for e in links if not isinstance(e, wrappers)]) or "unknown reason"
    return f"TLS handshake failed: {why}"


def _ssl_reason(error: BaseException) -> str:
    """OpenSSL's reason code in words (WRONG_VERSION_NUMBER: wrong version number), else the message without its
    `[SSL: ...]` prefix and `(_ssl.c:NNN)` suffix."""
    reason = getattr(error, "reason", None)
    if isinstance(reason, str) and reason:
        return _part(reason.lower().replace("_", " "))
    text = str(error.args[1] if len(error.args) > 1 else error)
    if text.startswith("[") and "]" in text:
        text = text.split("]", 1)[1]
    return _part(text.split(" (_ssl.c:", 1)[0].strip())


def _name(links: list[BaseException], host: str | None) -> str | None:
    for link in links:
        if isinstance(link, u3.NameResolutionError):
            conn = getattr(link, "conn", None)
            named = getattr(conn, "host", None) or host
            return f"name not resolved: {_part(str(named), 100)}" if named else "name not resolved"
        if isinstance(link, socket.gaierror):
            return f"name not resolved: {_part(host, 100)}" if host else "name not resolved"
    return None


def _basic(links: list[BaseException]) -> str | None:
    """The cause a socket gives: refused, reset, closed, unreachable, timed out."""
    for link in links:
        if isinstance(link, http.client.RemoteDisconnected):
            return "connection closed without an answer"
        if isinstance(link, ConnectionRefusedError):
            return "connection refused"
        if isinstance(link, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)):
            return "connection reset"
        if isinstance(link, (http.client.IncompleteRead, u3.IncompleteRead)):
            return "answer cut short"
        if isinstance(link, OSError) and link.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return "network unreachable" if link.errno == errno.ENETUNREACH else "host unreachable"
    for link in links:
        timeout = isinstance(link, (TimeoutError, rq.Timeout, u3.TimeoutError))
        if timeout and not isinstance(link, u3.NewConnectionError):  # a subclass of urllib3's timeout, for history
            return "timed out"
    return None


def _part(text: object, limit: int = PART) -> str:
    """A piece of text from outside that holds no secret (an OpenSSL reason, a host name): one line, printable,
    clipped."""
    return printable(" ".join(str(text)[: limit * 2].split())[:limit])[:limit]
