"""The fake API (fakeapi.py) served from one event loop, as `FakeProcess` runs it: an answer waiting out its
latency is a timer, not a sleeping thread. The threaded server spent 0.25-0.3 ms of CPU per 304 at 256 requests
in flight, a whole core of the bench's two at 900 polls a second, taken from the collector it measures; a remote
server's CPU is never on the client's machine. Request heads are parsed by net/head.py (the collector's one
request-head parser); each answer is made by fakeapi's `answer_request`, the same bytes as the threaded server's,
and the answers on one connection leave in the order of their requests.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

from ..net.head import HEAD_LIMIT, Head, HeadError, head_end, parse

Respond = Callable[[str, str, Callable[[str], str | None]], tuple[bytes, float | None]]
# (base URL, request target, a header by name) -> the answer's bytes and its delay (None: at once, not counted)

BACKLOG = 1024  # connections waiting to be accepted (a bench opens hundreds at once)


class _Connection(asyncio.Protocol):
    """One client's connection: its requests read as they come, their answers sent when due, in order."""

    def __init__(self, respond: Respond, late: Callable[[float], object], base_url: str):
        self.respond, self.late, self.base_url = respond, late, base_url
        self.loop = asyncio.get_running_loop()
        self.transport: Any = None
        self.received = bytearray()
        self.queue: deque[tuple[float, bytes, bool, bool]] = deque()  # due, answer, counted, keep open after
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.received += data
        while (end := head_end(self.received)) >= 0:
            try:
                head = parse(self.received[:end])
                length = head.content_length
            except (HeadError, ValueError):
                self.transport.close()
                return
            if len(self.received) < end + length:
                return  # its body is still coming (read past: the fake answers GETs)
            del self.received[: end + length]
            self.answer(head)
        if len(self.received) > HEAD_LIMIT + 4:
            self.transport.close()

    def answer(self, head: Head) -> None:
        arrived = self.loop.time()
        headers = head.headers
        if head.method == "GET":
            target = f"{head.path}?{head.query}" if head.query else head.path
            data, delay = self.respond(self.base_url, target, lambda name: headers.get(name.lower()))
        else:  # as the threaded server answers what it has no handler for
            data, delay = b"HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\n\r\n", None
        due = arrived + (delay or 0.0)
        if self.queue:  # never before the answer to the request before it
            due = max(due, self.queue[-1][0])
        self.queue.append((due, data, delay is not None, kept_alive(head.version, headers.get("connection", ""))))
        if self.timer is None:
            self.timer = self.loop.call_at(due, self.flush)

    def flush(self) -> None:
        """Send every answer due now, in order; wait for the next."""
        self.timer = None
        while self.queue and self.queue[0][0] <= self.loop.time():
            due, data, counted, keep = self.queue.popleft()
            self.transport.write(data)
            if counted:
                self.late(self.loop.time() - due)  # its writing, and how late past its latency it left
            if not keep:
                self.transport.close()
                self.queue.clear()
                return
        if self.queue:
            self.timer = self.loop.call_at(self.queue[0][0], self.flush)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.queue.clear()


def kept_alive(version: str, connection: str) -> bool:
    """Whether the connection stays open after the answer (HTTP/1.1 unless `close`; 1.0 only with `keep-alive`)."""
    tokens = {token.strip().lower() for token in connection.split(",")}
    return "close" not in tokens if version == "HTTP/1.1" else "keep-alive" in tokens


async def _serve(respond: Respond, late: Callable[[float], object], started: Callable[[str], object]) -> None:
    loop = asyncio.get_running_loop()
    base = {"url": ""}
    server = await loop.create_server(
        lambda: _Connection(respond, late, base["url"]), "127.0.0.1", 0, backlog=BACKLOG, reuse_address=True
    )
    base["url"] = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    started(base["url"])
    await server.serve_forever()


def serve(respond: Respond, late: Callable[[float], object], started: Callable[[str], object]) -> None:
    """Serve `respond`'s answers on 127.0.0.1 (a free port) until the process ends; `started(url)` once it
    listens, `late(seconds)` as each counted answer leaves, how late past its delay."""
    asyncio.run(_serve(respond, late, started))
