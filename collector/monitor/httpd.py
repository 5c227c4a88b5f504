"""The monitor's HTTP/1.1 plumbing on one asyncio event loop: requests read within bounds, answers written
without waiting on any other client, and server-sent event streams fed by one broadcast.

The bounds are the collector's one server core (net/server.py, net/head.py), as for the metrics port
(daemon/httpserver.py), because the page is left open for days and anything can connect:
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
  because `broadcast` only queues bytes on each transport.

Why not a library: the collector already depends on none that serves HTTP asynchronously, and the bounds above
are the point; asyncio's streams give them in a few lines.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import json
import logging
import math
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs

from ..net.head import HEAD_LIMIT, HeadError, parse
from ..net.server import DEADLINE, SEND_BUFFER, STREAM, WORKING, Budget, CutShort, Room, give_back_freed

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


@dataclass
class Server:
    """Serve `handler` on host:port; `broadcast(data)` sends `data` to every open event stream."""

    handler: Handler
    room: Room[asyncio.StreamWriter] = field(default_factory=lambda: Room(MAX_CONNECTIONS))
    budget: Budget = field(default_factory=lambda: Budget(HELD_TOTAL, STREAM_BACKLOG))
    cut_short: CutShort = field(default_factory=lambda: cut_short())
    accepted: int = 0
    server: asyncio.base_events.Server | None = None

    @property
    def connections(self) -> int:
        return len(self.room)

    @property
    def closed(self) -> collections.Counter[str]:
        """Connections cut short since the start, by reason."""
        return self.cut_short.closed

    @property
    def streams(self) -> list[asyncio.StreamWriter]:
        return [writer for writer in self.room if self.room.state(writer) == STREAM]

    def held(self) -> dict[asyncio.StreamWriter, int]:
        """The bytes written for each client and not yet taken by its socket."""
        return {writer: writer.transport.get_write_buffer_size() for writer in self.room}

    async def start(self, host: str, port: int) -> int:
        self.room, self.budget = Room(MAX_CONNECTIONS), Budget(HELD_TOTAL, STREAM_BACKLOG)  # the bounds as now set
        self.cut_short = cut_short()
        give_back_freed()  # what a cut client held goes back to the system, not into a fragmented heap
        self.server = await asyncio.start_server(self.serve, host, port, limit=HEAD_LIMIT, backlog=128)
        return self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()  # no new connection
        for writer in list(self.room):
            cut(writer)
        self.cut_short.report(math.inf)
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 2)

    def broadcast(self, data: bytes) -> None:
        self.cut_short.report(time.monotonic())  # once a minute at most, and only when some were cut
        held = self.held()
        for writer in self.streams:
            if writer not in held:
                continue  # cut for room already
            if writer.is_closing():  # its page went away
                self.room.remove(writer)
                del held[writer]
                continue
            if self.budget.over_client(held[writer]):
                self.drop(writer, "slow")  # what it did not read is dropped with it: memory and descriptor now
                del held[writer]
                continue
            self.make_room(held, len(data))
            if writer in held:
                writer.write(data)
                held[writer] = writer.transport.get_write_buffer_size()

    def make_room(self, held: dict[asyncio.StreamWriter, int], size: int) -> None:
        """Cut the clients holding the most unread bytes until `size` more fit in the total (in `held` too)."""
        for writer in self.budget.to_cut(held, size):
            self.drop(writer, "slow")
            del held[writer]

    def drop(self, writer: asyncio.StreamWriter, reason: str) -> None:
        self.room.remove(writer)
        self.cut_short.count(reason)
        cut(writer)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        if (victim := self.room.victim()) is not None:
            self.drop(victim, "evicted")
        self.room.add(writer)
        self.accepted += 1
        try:
            await self._exchange(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client went away, or the monitor is stopping
        except Exception:
            log.exception("monitor: a request failed")
        finally:
            self.room.remove(writer)
            cut(writer, gently=True)

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            working = functools.partial(self.room.mark, writer, WORKING)  # once the head is whole
            request = await asyncio.wait_for(read_request(reader, peer(writer), working), REQUEST_TIMEOUT)
        except BadRequest as bad:
            await self._answer(writer, Answer.json(bad.status, {"ok": False, "message": str(bad)}))
            return
        except TimeoutError:
            self.cut_short.count("timeout")
            await self._answer(writer, Answer.json(408, {"ok": False, "message": "the request came too slowly"}))
            return
        answer = await self.handler(request)
        if answer.stream is None:
            await self._answer(writer, answer)
            return
        first = head(200, "text/event-stream", None) + answer.stream
        del answer  # from here on its bytes are held by the transport alone, and counted (held())
        self._open_stream(writer, first)
        del first
        while await reader.read(1024):  # until the page goes away (anything it sends is ignored)
            pass

    def _open_stream(self, writer: asyncio.StreamWriter, first: bytes) -> None:
        if len(streams := self.streams) >= MAX_STREAMS:
            self.drop(streams[0], "evicted")  # the oldest page: its browser reconnects
        self.make_room(self.held(), len(first))
        writer.write(first)
        self.room.mark(writer, STREAM)

    async def _answer(self, writer: asyncio.StreamWriter, answer: Answer) -> None:
        self.room.mark(writer, WORKING)
        data = answer_bytes(answer)
        self.make_room(self.held(), len(data))
        writer.write(data)
        del data  # what the client has not taken is held by the transport alone while it drains, and counted
        with contextlib.suppress(ConnectionError, TimeoutError):
            await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT)


def cut_short() -> CutShort:
    """The monitor's count of connections cut short, and its words for them (the bounds as now set)."""
    words = {
        "evicted": f"closed to make room for newer ones ({MAX_CONNECTIONS} open, {MAX_STREAMS} pages at most)",
        "slow": f"closed for reading too slowly ({STREAM_BACKLOG} bytes waiting for one, {HELD_TOTAL} for all)",
        "timeout": f"answered 408 (no whole request within {REQUEST_TIMEOUT:g}s)",
    }
    return CutShort("monitor", words, log)


def answer_bytes(answer: Answer) -> bytes:
    return head(answer.status, answer.content_type, len(answer.body)) + answer.body


def cut(writer: asyncio.StreamWriter, gently: bool = False) -> None:
    """Close a connection. What its client has not read yet is dropped (an abort), unless `gently` and it is all
    sent: a close alone would keep the buffer, and the descriptor, for as long as the client does not read."""
    if gently and not writer.transport.get_write_buffer_size():
        writer.close()
    else:
        writer.transport.abort()


def peer(writer: asyncio.StreamWriter) -> str:
    address = writer.get_extra_info("peername")
    return str(address[0]) if isinstance(address, tuple) else "?"


async def read_request(reader: asyncio.StreamReader, who: str, whole: Callable[[], object] = lambda: None) -> Request:
    """One request, its head parsed by the one head parser (net/head.py); `whole()` is called once the head is."""
    try:
        parsed = parse(await read_head(reader))
    except HeadError as bad:
        raise BadRequest(bad.status, bad.reason) from None
    whole()
    headers = parsed.headers
    body = b""
    if parsed.method == "POST":
        body = await read_body(reader, headers)
    try:
        query = parse_qs(parsed.query, max_num_fields=20)
    except ValueError:
        raise BadRequest(400, "at most 20 query fields") from None
    return Request(parsed.method, parsed.path, query, headers, body, who)


async def read_head(reader: asyncio.StreamReader) -> bytes:
    """The request head up to its empty line (lines ending in CRLF or LF), at most HEAD_LIMIT bytes."""
    raw = bytearray()
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.LimitOverrunError:
            raise BadRequest(431, f"request head over {HEAD_LIMIT} bytes") from None
        raw += line
        if len(raw) > HEAD_LIMIT:
            raise BadRequest(431, f"request head over {HEAD_LIMIT} bytes")
        if line in (b"\n", b"\r\n"):
            return bytes(raw)


async def read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "transfer-encoding" in headers:
        raise BadRequest(411, "send a Content-Length")
    text = headers.get("content-length", "0").split(",")[0].strip()  # repeats agree (net/head.py checked)
    if not text.isascii() or not text.isdigit() or len(text) > 9:
        raise BadRequest(400, "bad Content-Length")
    length = int(text)
    if length > BODY_LIMIT:
        raise BadRequest(413, f"a body of at most {BODY_LIMIT} bytes")
    return await reader.readexactly(length)


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
