"""`collector.net.causes.cause` over exception chains built as requests, urllib3, ssl and the socket build them:
each failure named in its fixed words, the proxy by host and port only, nothing of a URL, text clipped and
printable, any chain (a loop, a thousand links, something else entirely) answered at once."""

from __future__ import annotations

import errno
import http.client
import socket
import ssl

import pytest
import requests
import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import (
    IncompleteRead,
    MaxRetryError,
    NameResolutionError,
    NewConnectionError,
    ProtocolError,
    ProxyError,
    ReadTimeoutError,
    SSLError,
)
from urllib3.util.ssl_match_hostname import CertificateError

from collector.net.causes import LIMIT, cause

SECRET = "hunter2-proxy-pass"


def chain(*links: BaseException) -> BaseException:
    """`links[0]` raised from `links[1]`, raised from `links[2]`, ...: the outermost first."""
    for outer, inner in zip(links, links[1:], strict=False):
        outer.__cause__ = inner
    return links[0]


def as_requests(inner: BaseException, kind: type = requests.exceptions.ConnectionError, url: str = "/p") -> Exception:
    """How requests raises it: its error holding urllib3's MaxRetryError whose reason is `inner`."""
    retry = MaxRetryError(None, f"{url}?token=SECRET-IN-QUERY", reason=inner)  # type: ignore[arg-type]
    return chain(kind(retry), retry)


def verify_error(message: str, code: int = 18) -> ssl.SSLCertVerificationError:
    error = ssl.SSLCertVerificationError(1, f"[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {message}")
    error.verify_message = message
    error.verify_code = code
    return error


def refused_connect(host: str = "127.0.0.1", port: int = 9) -> NewConnectionError:
    conn = HTTPSConnection(host, port)
    return chain(NewConnectionError(conn, "Failed to establish a new connection"), ConnectionRefusedError(111, "no"))


@pytest.mark.parametrize(
    "message",
    [
        "self-signed certificate",
        "self-signed certificate in certificate chain",
        "certificate has expired",
        "unable to get local issuer certificate",
        "certificate is not yet valid",
    ],
)
def test_a_certificate_that_fails_verification_is_named_with_openssls_reason(message):
    error = as_requests(chain(SSLError(verify_error(message)), verify_error(message)), requests.exceptions.SSLError)
    assert cause(error) == f"certificate verify failed: {message}"
    assert cause(verify_error(message)) == f"certificate verify failed: {message}"


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (verify_error("Hostname mismatch, certificate is not valid for 'a.test'.", 62), "hostname mismatch"),
        (verify_error("IP address mismatch, certificate is not valid for '10.0.0.1'.", 64), "IP address mismatch"),
        (CertificateError("hostname 'x.test' doesn't match 'y.test'"), "hostname mismatch"),
        (ssl.CertificateError("hostname 'x.test' doesn't match 'y.test'"), "hostname mismatch"),
    ],
)
def test_a_name_the_certificate_is_not_for_is_a_mismatch(error, expected):
    assert cause(as_requests(chain(SSLError(error), error))) == f"certificate verify failed: {expected}"


def ssl_error(reason: str, text: str, kind: type = ssl.SSLError) -> ssl.SSLError:
    error = kind(1, f"[SSL: {reason}] {text} (_ssl.c:1000)")
    error.reason = reason  # type: ignore[misc]
    return error


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ssl_error("WRONG_VERSION_NUMBER", "wrong version number"), "wrong version number"),
        (ssl_error("TLSV1_ALERT_PROTOCOL_VERSION", "alert"), "tlsv1 alert protocol version"),
        (ssl_error("UNSAFE_LEGACY_RENEGOTIATION_DISABLED", "x"), "unsafe legacy renegotiation disabled"),
        (ssl.SSLEOFError(8, "EOF occurred in violation of protocol"), "connection closed during the handshake"),
        (ssl.SSLError(1, "[SSL] something else (_ssl.c:99)"), "something else"),
        (ConnectionResetError(104, "reset"), "connection reset"),  # under urllib3's SSLError
    ],
)
def test_a_tls_failure_other_than_verification_is_a_failed_handshake(error, expected):
    assert cause(as_requests(chain(SSLError(error), error))) == f"TLS handshake failed: {expected}"


def test_an_unreachable_proxy_is_named_by_host_and_port_never_by_its_credentials():
    manager = urllib3.ProxyManager(f"http://collector:{SECRET}@10.1.2.3:3128")
    pool = manager.connection_from_url("https://api.example.test/user")
    retry = MaxRetryError(pool, "/user?access_token=abc", reason=ProxyError("Unable to connect to proxy", None))
    inner = refused_connect("10.1.2.3", 3128)
    retry.reason = chain(ProxyError("Unable to connect to proxy", inner), inner)
    for error in (chain(requests.exceptions.ProxyError(retry), retry), retry, retry.reason):
        text = cause(error)
        assert text == "proxy unreachable: 10.1.2.3:3128 (connection refused)"
        assert SECRET not in text and "collector" not in text and "access_token" not in text


@pytest.mark.parametrize(
    ("proxy", "shown"),
    [
        ("http://u:p@proxy.example:8080", "proxy.example:8080"),
        ("https://proxy.example", "proxy.example:443"),
        ("http://[::1]:3128", "[::1]:3128"),
        ("http://proxy.example", "proxy.example:80"),
    ],
)
def test_the_proxy_is_the_one_the_pool_goes_through(proxy, shown):
    pool = urllib3.ProxyManager(proxy).connection_from_url("https://api.example.test/")
    inner = chain(ProxyError("Unable to connect to proxy", TimeoutError("timed out")), TimeoutError("timed out"))
    assert cause(MaxRetryError(pool, "/", reason=inner)) == f"proxy unreachable: {shown} (timed out)"


def test_a_proxy_whose_name_does_not_resolve_says_so():
    conn = HTTPConnection("proxy.invalid", 3128)
    lookup = chain(NameResolutionError("proxy.invalid", conn, socket.gaierror(-2, "unknown")), socket.gaierror(-2, "x"))
    error = chain(ProxyError("Unable to connect to proxy", lookup), lookup)
    assert cause(error) == "proxy unreachable: proxy.invalid:3128 (name not resolved: proxy.invalid)"


@pytest.mark.parametrize(
    ("line", "status"),
    [
        ("407 Proxy Authentication Required", "407 Proxy Authentication Required"),
        (f"407 bad password {SECRET} for collector", "407 Proxy Authentication Required"),  # the proxy's words: never
        ("403 Forbidden", "403 Forbidden"),
        ("502 Whatever", "502 Bad Gateway"),
        ("999 \x1b[31mred\nforged", "999"),
        ("garbage", "no status"),
        ("", "no status"),
    ],
)
def test_a_proxy_refusing_the_tunnel_is_named_with_its_status_in_our_words(line, status):
    refusal = OSError(f"Tunnel connection failed: {line}")
    text = cause(chain(ProxyError("Unable to connect to proxy", refusal), refusal))
    assert text == f"proxy refused the tunnel: {status}"


@pytest.mark.parametrize("host", ["nohost.invalid", "api.example.invalid", "xn--bcher-kva.invalid"])
def test_a_name_that_does_not_resolve_is_named(host):
    conn = HTTPSConnection(host, 443)
    error = chain(NameResolutionError(host, conn, socket.gaierror(-2, "Name or service not known")), socket.gaierror())
    assert cause(as_requests(error)) == f"name not resolved: {host}"
    assert cause(socket.gaierror(-3, "Temporary failure"), host=host) == f"name not resolved: {host}"
    assert cause(socket.gaierror(-2, "x")) == "name not resolved"


@pytest.mark.parametrize(
    ("inner", "expected"),
    [
        (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "connection refused"),
        (ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), "connection reset"),
        (ConnectionAbortedError(errno.ECONNABORTED, "aborted"), "connection reset"),
        (BrokenPipeError(errno.EPIPE, "Broken pipe"), "connection reset"),
        (http.client.RemoteDisconnected("Remote end closed connection"), "connection closed without an answer"),
        (OSError(errno.ENETUNREACH, "Network is unreachable"), "network unreachable"),
        (OSError(errno.EHOSTUNREACH, "No route to host"), "host unreachable"),
        (TimeoutError("timed out"), "timed out"),
        (urllib3.exceptions.ConnectTimeoutError("connect timed out"), "timed out"),
    ],
)
def test_what_the_socket_says_is_named_through_every_wrapper(inner, expected):
    connect = chain(NewConnectionError(HTTPConnection("h.test", 80), "failed"), inner)
    protocol = ProtocolError("Connection aborted.", inner)
    for error in (inner, connect, as_requests(connect), as_requests(protocol), chain(RuntimeError("x"), inner)):
        assert cause(error) == expected


def test_a_cut_answer_and_urllib3s_timeouts_are_named():
    cut = ProtocolError("Connection broken", IncompleteRead(10, 20))
    assert cause(as_requests(cut)) == "answer cut short"
    assert cause(ReadTimeoutError(None, "/p?key=x", "read timed out")) == "timed out"  # type: ignore[arg-type]
    assert cause(requests.exceptions.ConnectTimeout("x")) == "timed out"


@pytest.mark.parametrize(
    "error",
    [
        ValueError("nothing to do with a socket"),
        NewConnectionError(HTTPConnection("h.test", 80), "no reason given"),  # urllib3's "timeout", for history
        requests.exceptions.ConnectionError("bare"),
        ProtocolError("Connection aborted.", "a string"),
        KeyError("x"),
    ],
)
def test_anything_else_has_no_cause_and_the_caller_keeps_its_words(error):
    assert cause(error) is None
    assert cause(None) is None


def test_no_url_nor_query_of_the_request_reaches_the_text():
    for inner in (refused_connect(), TimeoutError(), socket.gaierror(-2, "x")):
        text = cause(as_requests(inner, url="/user/starred"))
        assert text is not None and "SECRET" not in text and "token" not in text and "/user" not in text


def test_outside_text_is_clipped_and_made_printable():
    hostile = "evil\x1b]0;title\x07\nsecond line\u202e" + "x" * 10_000
    for error in (verify_error(hostile), ssl_error("X", hostile, ssl.SSLError)):
        text = cause(chain(SSLError(error), error))
        assert text is not None and len(text) <= LIMIT
        assert text.isprintable() and "\n" not in text and "\x1b" not in text and "\u202e" not in text
    conn = HTTPSConnection("a" * 5000 + ".invalid", 443)
    long_name = cause(NameResolutionError(conn.host, conn, socket.gaierror(-2, "x")))
    assert long_name is not None and len(long_name) <= LIMIT


def test_a_looping_or_endless_chain_is_answered_at_once():
    first, second = ValueError("a"), ValueError("b")
    first.__context__, second.__context__ = second, first
    assert cause(first) is None
    deep: BaseException = ConnectionRefusedError(111, "refused")
    for n in range(5000):
        deep = chain(RuntimeError(str(n)), deep)
    assert cause(deep) is None  # past the links looked at: unnamed, and no recursion limit reached
    assert cause(chain(RuntimeError("near"), ConnectionResetError())) == "connection reset"
