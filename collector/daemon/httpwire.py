"""HTTP/1.x as the metrics port speaks it, without sockets: a request head (parsed by net/head.py, the one parser
the monitor uses too) made a WSGI environ, a WSGI app's answer collected whole, and an answer written out as bytes
(the server core, net/core.py, moves them over the wire for `daemon/httpserver.py`)."""

from __future__ import annotations

import io
import sys
import urllib.parse
from collections.abc import Callable, Iterable
from email.utils import formatdate
from typing import Any

from ..net.head import Head

__all__ = ["PLAIN", "Answer", "WsgiApp", "environ", "refusal", "response", "run_app"]

WsgiApp = Callable[[dict, Callable], Iterable[bytes]]
Answer = tuple[str, list[tuple[str, str]], bytes]  # status, headers, body

OWN_HEADERS = ("content-length", "connection", "transfer-encoding", "date")  # the server's to set, not the app's
PLAIN = [("Content-Type", "text/plain; charset=utf-8")]


STATUS_LINES = {400: "400 Bad Request", 431: "431 Request Header Fields Too Large"}


def refusal(status: int, reason: str) -> bytes:
    """The answer to a request head refused (by net/head.py's rules): the status and why, in plain text."""
    return response(STATUS_LINES.get(status, "400 Bad Request"), PLAIN, reason.encode() + b"\n")


def environ(parsed: Head, addr: str, port: int) -> dict[str, Any]:
    """The WSGI environ of a whole request head."""
    env: dict[str, Any] = {
        "REQUEST_METHOD": parsed.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": urllib.parse.unquote(parsed.path, "iso-8859-1"),
        "QUERY_STRING": parsed.query,
        "SERVER_NAME": addr,
        "SERVER_PORT": str(port),
        "SERVER_PROTOCOL": parsed.version,
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    for name, value in parsed.fields:
        _add_header(env, name, value)
    return env


def _add_header(env: dict[str, Any], name: str, value: str) -> None:
    if "_" in name:
        return  # as wsgiref: X_Y would pass for X-Y
    key = name.upper().replace("-", "_")
    key = key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else "HTTP_" + key
    env[key] = env[key] + "," + value if key in env else value


def run_app(app: WsgiApp, env: dict[str, Any]) -> tuple[list[Any], bytes]:
    """What the app started its answer with ([status, headers]; empty if it never did) and the body, joined;
    whatever the app raises is raised."""
    started: list[Any] = []
    written: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable:
        started[:] = [status, headers]
        return written.append

    result = app(env, start_response)
    try:
        return started, b"".join([*written, *result])
    finally:
        getattr(result, "close", lambda: None)()


def response(status: str, headers: list[tuple[str, str]], body: bytes, send_body: bool = True) -> bytes:
    """An answer's bytes: the app's headers but the server's own, then Date, Content-Length and `Connection: close`."""
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers if k.lower() not in OWN_HEADERS)]
    lines += [f"Date: {formatdate(usegmt=True)}", f"Content-Length: {len(body)}", "Connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body if send_body else b"")
