"""The monitor's HTTP/1.1 plumbing on one asyncio event loop: requests read within bounds, answers written
without waiting on any other client, and server-sent event streams fed by one broadcast.

Bounds, as for the metrics port (daemon/httpserver.py), because the page is left open for days and anything can
connect:
- at most MAX_CONNECTIONS connections at once, of which at most MAX_STREAMS event streams; past that a new one
  is answered 503 and closed;
- a request head (≤ HEAD_LIMIT bytes) and its body (≤ BODY_LIMIT) must arrive within REQUEST_TIMEOUT seconds, and
  an answer be taken within WRITE_TIMEOUT; every plain answer closes its connection;
- a stream whose reader falls behind by more than STREAM_BACKLOG bytes is closed (its browser reconnects by
  itself and starts from the latest snapshot): a slow or stalled page costs at most that much memory, and never
  delays the others, because `broadcast` only queues bytes on each transport.

Why not a library: the collector already depends on none that serves HTTP asynchronously, and the bounds above
are the point; asyncio's streams give them in a few lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

log = logging.getLogger("collector.monitor")

MAX_CONNECTIONS = 256
MAX_STREAMS = 64
HEAD_LIMIT = 8192
BODY_LIMIT = 16 * 1024
REQUEST_TIMEOUT = 10.0
WRITE_TIMEOUT = 10.0
STREAM_BACKLOG = 4 * 2**20  # bytes queued for one stream before it is cut
SEND_BUFFER = 64 * 1024  # the kernel's buffer per connection (it doubles it), not autotuned up to megabytes
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
    open: set[asyncio.StreamWriter] = field(default_factory=set)  # every connection held, streams included
    streams: set[asyncio.StreamWriter] = field(default_factory=set)
    server: asyncio.base_events.Server | None = None

    @property
    def connections(self) -> int:
        return len(self.open)

    async def start(self, host: str, port: int) -> int:
        self.server = await asyncio.start_server(self.serve, host, port, limit=HEAD_LIMIT, backlog=128)
        return self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()  # no new connection
        for writer in list(self.open):
            cut(writer)
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 2)

    def broadcast(self, data: bytes) -> None:
        for writer in list(self.streams):
            if writer.is_closing() or writer.transport.get_write_buffer_size() > STREAM_BACKLOG:
                self.streams.discard(writer)
                cut(writer)  # what it did not read is dropped with it: memory and descriptor come back now
                continue
            writer.write(data)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        if self.connections >= MAX_CONNECTIONS:
            writer.write(answer_bytes(Answer.json(503, {"ok": False, "message": "too many connections"})))
            cut(writer, gently=True)
            return
        self.open.add(writer)
        try:
            await self._exchange(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client went away, or the monitor is stopping
        except Exception:
            log.exception("monitor: a request failed")
        finally:
            self.open.discard(writer)
            self.streams.discard(writer)
            cut(writer, gently=True)

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(read_request(reader, peer(writer)), REQUEST_TIMEOUT)
        except BadRequest as bad:
            await self._answer(writer, Answer.json(bad.status, {"ok": False, "message": str(bad)}))
            return
        except TimeoutError:
            await self._answer(writer, Answer.json(408, {"ok": False, "message": "the request came too slowly"}))
            return
        answer = await self.handler(request)
        if answer.stream is None:
            await self._answer(writer, answer)
            return
        if len(self.streams) >= MAX_STREAMS:
            await self._answer(writer, Answer.json(503, {"ok": False, "message": "too many pages open"}))
            return
        writer.write(head(200, "text/event-stream", None) + answer.stream)
        self.streams.add(writer)
        while await reader.read(1024):  # until the page goes away (anything it sends is ignored)
            pass

    async def _answer(self, writer: asyncio.StreamWriter, answer: Answer) -> None:
        writer.write(answer_bytes(answer))
        with contextlib.suppress(ConnectionError, TimeoutError):
            await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT)


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


async def read_request(reader: asyncio.StreamReader, who: str) -> Request:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        raise BadRequest(431, f"request head over {HEAD_LIMIT} bytes") from None
    try:
        lines = raw.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ")
        headers = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
    except ValueError:
        raise BadRequest(400, "malformed request") from None
    if not version.startswith("HTTP/1."):
        raise BadRequest(400, "HTTP/1.x only")
    body = b""
    if method == "POST":
        body = await read_body(reader, headers)
    parts = urlsplit(target)
    try:
        query = parse_qs(parts.query, max_num_fields=20)
    except ValueError:
        raise BadRequest(400, "at most 20 query fields") from None
    return Request(method, parts.path, query, headers, body, who)


async def read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "transfer-encoding" in headers:
        raise BadRequest(411, "send a Content-Length")
    text = headers.get("content-length", "0")
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
