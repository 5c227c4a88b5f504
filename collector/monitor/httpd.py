"""The monitor's HTTP/1.1 plumbing on one asyncio event loop: requests read within bounds, answers written
without waiting on any other client, and server-sent event streams fed by one broadcast.

The connections are the collector's one server core's (net/core.py, on its policy net/server.py and its head
parser net/head.py), as the metrics port's (daemon/httpserver.py); this module gives it the monitor's bounds and
answers, because the page is left open for days and anything can connect:
- at most MAX_CONNECTIONS connections at once, of which at most MAX_STREAMS event streams. A newcomer always gets
  in: at the bound the oldest idle connection is closed (one without a whole request head yet), else the oldest
  event stream (its browser reconnects by itself), else the oldest; a new stream past MAX_STREAMS closes the
  oldest stream. So a page load or an action gets in however many idle clients hold connections;
- a request head (≤ HEAD_LIMIT bytes, parsed by the one head parser) and its body (≤ BODY_LIMIT) must arrive
  within REQUEST_TIMEOUT seconds, and an answer be taken within WRITE_TIMEOUT; every plain answer closes its
  connection;
- the bytes written and not yet taken by the clients' sockets are bounded for every client together
  (HELD_TOTAL) and for one (STREAM_BACKLOG): a stream past its share is closed, and past the total the clients
  holding the most are closed first (the slowest readers). A slow or stalled page never delays the others,
  because `broadcast` only queues bytes for each connection.

Why not a library: the collector already depends on none that serves HTTP asynchronously, and the bounds above
are the point.
"""

from __future__ import annotations

import collections
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import parse_qs

from ..net.core import Connection, Core, Policy, listen
from ..net.head import HEAD_LIMIT, Head
from ..net.server import DEADLINE, Budget, give_back_freed

log = logging.getLogger("collector.monitor")

MAX_CONNECTIONS = 256
MAX_STREAMS = 64
BODY_LIMIT = 16 * 1024
REQUEST_TIMEOUT = DEADLINE
WRITE_TIMEOUT = DEADLINE
STREAM_BACKLOG = 1 * 2**20  # bytes waiting for one client before it is cut
HELD_TOTAL = 8 * 2**20  # bytes waiting for every client together; past it the slowest readers are cut
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = (
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Cache-Control", "no-store"),
)
REASONS = {
    200: "OK",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    409: "Conflict",
    411: "Length Required",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    421: "Misdirected Request",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # names in lower case
    body: bytes
    peer: str


@dataclass
class Answer:
    status: int
    body: bytes
    content_type: str = "application/json"
    stream: bytes | None = None  # an event stream: these bytes first, then every broadcast

    @classmethod
    def json(cls, status: int, value: object) -> Answer:
        return cls(status, json.dumps(value).encode())


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


Handler = Callable[[Request], Awaitable[Answer]]


class Server:
    """Serve `handler` on host:port on the one server core (net/core.py); `broadcast(data)` sends `data` to every
    open event stream."""

    def __init__(self, handler: Handler):
        self.handler = handler
        self.core = self._core()

    def _core(self) -> Core:
        """The core under the bounds as now set."""
        late = answer_bytes(Answer.json(408, {"ok": False, "message": "the request came too slowly"}))
        policy = Policy(
            MAX_CONNECTIONS,
            REQUEST_TIMEOUT,
            Budget(HELD_TOTAL, STREAM_BACKLOG),
            refuse=refusal,
            answer_time=WRITE_TIMEOUT,
            late=late,
            body_limit=BODY_LIMIT,
            max_streams=MAX_STREAMS,
        )
        return Core("monitor", self._handle, policy, words(), log)

    @property
    def accepted(self) -> int:
        return self.core.accepted

    @property
    def connections(self) -> int:
        return len(self.core.room)

    @property
    def closed(self) -> collections.Counter[str]:
        """Connections cut short since the start, by reason."""
        return self.core.cut_short.closed

    @property
    def streams(self) -> list[Connection]:
        return self.core.streams

    def held(self) -> dict[Connection, int]:
        """The bytes written for each client and not yet taken by its socket."""
        return {conn: conn.held for conn in self.core.room}

    async def start(self, host: str, port: int) -> int:
        self.core = self._core()
        give_back_freed()  # what a cut client held goes back to the system, not into a fragmented heap
        listener = listen(host, port)
        self.core.start(listener)
        return int(listener.getsockname()[1])

    async def close(self) -> None:
        self.core.close()

    def broadcast(self, data: bytes) -> None:
        self.core.broadcast(data)

    def _handle(self, conn: Connection, head: Head, body: bytes) -> Awaitable[None]:
        return self._respond(conn, request(head, body, peer(conn)))

    async def _respond(self, conn: Connection, asked: Request | BadRequest) -> None:
        if isinstance(asked, BadRequest):
            self.core.count("refused")
            self.core.answer(conn, answer_bytes(Answer.json(asked.status, {"ok": False, "message": str(asked)})))
            return
        answer = await self.handler(asked)
        if answer.stream is None:
            self.core.answer(conn, answer_bytes(answer))
        else:  # from here on its bytes are held by the core alone, and counted (held())
            self.core.stream(conn, head(200, "text/event-stream", None) + answer.stream)


def words() -> dict[str, str]:
    """The monitor's words for the connections it cut short (the bounds as now set)."""
    return {
        "evicted": f"closed to make room for newer ones ({MAX_CONNECTIONS} open, {MAX_STREAMS} pages at most)",
        "slow": f"closed for reading too slowly ({STREAM_BACKLOG} bytes waiting for one, {HELD_TOTAL} for all)",
        "timeout": f"answered 408 (no whole request within {REQUEST_TIMEOUT:g}s)",
        "refused": f"refused (malformed, a head over {HEAD_LIMIT} bytes or a body over {BODY_LIMIT})",
        "failed": "closed after a failure of the monitor's own (logged)",
    }


def refusal(status: int, reason: str) -> bytes:
    """The answer to a request the core refuses (net/head.py's rules, the body's bounds)."""
    return answer_bytes(Answer.json(status, {"ok": False, "message": reason}))


def answer_bytes(answer: Answer) -> bytes:
    return head(answer.status, answer.content_type, len(answer.body)) + answer.body


def peer(conn: Connection) -> str:
    try:
        address = conn.sock.getpeername()
    except OSError:
        return "?"
    return str(address[0]) if isinstance(address, tuple) else "?"


def request(parsed: Head, body: bytes, who: str) -> Request | BadRequest:
    """The Request of a whole request (its head parsed by the one head parser, net/head.py), or why not."""
    try:
        query = parse_qs(parsed.query, max_num_fields=20)
    except ValueError:
        return BadRequest(400, "at most 20 query fields")
    return Request(parsed.method, parsed.path, query, parsed.headers, body, who)


def head(status: int, content_type: str, length: int | None) -> bytes:
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}", f"Content-Type: {content_type}"]
    lines += [f"{name}: {value}" for name, value in SECURITY_HEADERS]
    if length is None:  # an event stream: open until one side closes it; a proxy must not buffer it
        lines += ["X-Accel-Buffering: no", "Connection: close"]
    else:
        lines += [f"Content-Length: {length}", "Connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def event(name: str, data: bytes) -> bytes:
    """One server-sent event; `data` is one line of JSON (no newline inside)."""
    return b"event: " + name.encode() + b"\ndata: " + data + b"\n\n"
