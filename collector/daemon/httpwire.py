"""HTTP/1.x as the metrics port speaks it, without sockets: a request head read into a WSGI environ, a WSGI app's
answer collected whole, and an answer written out as bytes (`daemon/httpserver.py` moves them over the wire)."""

from __future__ import annotations

import io
import re
import sys
import urllib.parse
from collections.abc import Callable, Iterable
from email.utils import formatdate
from typing import Any

WsgiApp = Callable[[dict, Callable], Iterable[bytes]]
Answer = tuple[str, list[tuple[str, str]], bytes]  # status, headers, body

TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
OWN_HEADERS = ("content-length", "connection", "transfer-encoding", "date")  # the server's to set, not the app's
PLAIN = [("Content-Type", "text/plain; charset=utf-8")]


class Refused(Exception):
    """A request head the server answers with an error of its own, without asking the app."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason

    def answer(self) -> Answer:
        return self.status, PLAIN, self.reason.encode() + b"\n"


def head_end(data: bytearray, start: int) -> int:
    """Where the request head in `data` ends (after its empty line), or -1; lines may end in CRLF or LF."""
    ends = [i + n for i, n in ((data.find(b"\n\r\n", start), 3), (data.find(b"\n\n", start), 2)) if i >= 0]
    return min(ends, default=-1)


def environ(head: bytearray, addr: str, port: int) -> dict[str, Any]:
    """The WSGI environ of a whole request head (its empty line excluded); Refused for one not HTTP/1.x."""
    lines = head.decode("latin-1").split("\n")
    method, path, query, version = _request_line(lines[0].rstrip("\r"))
    env: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "SCRIPT_NAME": "",
        "PATH_INFO": urllib.parse.unquote(path, "iso-8859-1"),
        "QUERY_STRING": query,
        "SERVER_NAME": addr,
        "SERVER_PORT": str(port),
        "SERVER_PROTOCOL": version,
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    for line in lines[1:]:
        _add_header(env, line.rstrip("\r"))
    return env


def _request_line(line: str) -> tuple[str, str, str, str]:
    """Method, path, query and version of a request line."""
    parts = line.split(" ")
    if len(parts) != 3 or not TOKEN.fullmatch(parts[0]) or not re.fullmatch(r"HTTP/1\.[0-9]", parts[2]):
        raise Refused("400 Bad Request", "not an HTTP/1.x request line")
    method, target, version = parts
    if target.lower().startswith(("http://", "https://")):  # the absolute form a proxy may send
        target = "/" + target.split("://", 1)[1].partition("/")[2]
    if not target.startswith("/"):
        raise Refused("400 Bad Request", "the target is not a path")
    path, _, query = target.partition("?")
    return method, path, query, version


def _add_header(env: dict[str, Any], line: str) -> None:
    if not line:
        return
    name, colon, value = line.partition(":")
    if not colon or not TOKEN.fullmatch(name):
        raise Refused("400 Bad Request", "a malformed header line")
    if "_" in name:
        return  # as wsgiref: X_Y would pass for X-Y
    key = name.upper().replace("-", "_")
    key = key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else "HTTP_" + key
    value = value.strip(" \t")
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
