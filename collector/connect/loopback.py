"""The redirect's end on this machine (RFC 8252 section 7.3): a one-shot listener on 127.0.0.1, an ephemeral port
unless one is given, that takes the first request for its callback path, answers it with a short page, and closes.
Other requests (a browser's /favicon.ico) get a 404. Nothing of a request is logged or echoed: its address holds
the code."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

CALLBACK = "/callback"
PAGE = (
    b"<!doctype html><meta charset=utf-8><title>likeastore collector</title>"
    b"<p>Done: the collector has the answer. You may close this page and return to the terminal.</p>"
)
ROUND = 0.5  # seconds a wait for a request lasts before the flow's deadline is looked at again


class Handler(BaseHTTPRequestHandler):
    server: Listener

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.split("?", 1)[0] != self.server.path:
            self.send_error(404)
            return
        self.server.arrived = f"http://{self.server.host}:{self.server.port}{self.path}"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
        pass  # the request line holds the code


class Listener(HTTPServer):
    """Bound at once (so the redirect address is known before the browser opens); `wait` serves until the callback
    came or the deadline passed."""

    def __init__(self, port: int = 0, path: str = CALLBACK, host: str = "127.0.0.1"):
        super().__init__((host, port), Handler)
        self.host, self.path = host, path
        self.port = self.server_address[1]
        self.arrived = ""
        self.timeout = ROUND

    @property
    def redirect_uri(self) -> str:
        return f"http://{self.host}:{self.port}{self.path}"

    def wait(self, deadline: float, clock: Callable[[], float], stop: threading.Event | None = None) -> str:
        """The address the browser ended on ("" when the deadline passed or `stop` was set first)."""
        while not self.arrived and clock() < deadline and not (stop and stop.is_set()):
            self.timeout = max(min(ROUND, deadline - clock()), 0.01)
            self.handle_request()
        return self.arrived

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server_close()
