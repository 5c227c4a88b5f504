"""The one small HTTP server core both servers of the collector run on (the metrics/health port,
daemon/httpserver.py, on an asyncio loop of its own thread; the monitor, monitor/httpd.py, on its asyncio loop): it
owns the I/O of every connection, on non-blocking sockets watched by the loop, never a thread per connection.

It accepts (at the bound, the policy of server.py closes the oldest idle connection for the newcomer; out of
descriptors, its own oldest connection), reads a request head (at most HEAD_LIMIT bytes, parsed by head.py) and,
where the server takes bodies, a body; it hands the whole request to the server's `handle`, which answers with
`answer` (bytes, then the connection is closed once they are sent) or opens an event stream with `stream` (fed by
`broadcast`). Every connection has one deadline (`Policy.timeout` from accept; `Policy.answer_time` again for the
answer where set); the bytes written and not yet taken by the sockets are held within one Budget for all clients.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import logging
import math
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .head import HEAD_LIMIT, Head, HeadError, head_end, parse
from .server import SEND_BUFFER, STREAM, WORKING, Budget, CutShort, Room

__all__ = ["Connection", "Core", "Held", "Policy", "listen"]

ACCEPTS_PER_ROUND = 64  # accepted in a row before the connections already open are read again
DESCRIPTOR_PAUSE = 0.5  # seconds the port stops accepting when the process has no descriptor left
READ_SIZE = 65536
STARVED = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)

WORDS = {  # for the connections the core itself cuts short; a server's own words come first
    "starved": "closed to free a file descriptor (the process had none left)",
    "paused": f"accepting paused {{n}} times for {DESCRIPTOR_PAUSE:g}s (no descriptor left)",
}

Handle = Callable[["Connection", Head, bytes], Awaitable[None] | None]


@dataclass
class Policy:
    """A server's bounds, and its own words for the answers the core gives without it."""

    limit: int  # connections held at once
    timeout: float  # seconds from accept to a whole request (and to the end of the answer, without answer_time)
    budget: Budget
    refuse: Callable[[int, str], bytes]  # the answer to a request refused (status, reason)
    answer_time: float | None = None  # seconds again for the answer, from its start
    late: bytes | None = None  # the answer to a request not whole in time (else that connection is closed)
    body_limit: int | None = None  # a POST's body is read, up to this (else no body is read)
    max_streams: int | None = None


class Connection:
    """One client: what it sent, what is still to send to it, and its deadline."""

    __slots__ = ("sock", "fd", "data", "scanned", "out", "held", "timer", "streaming", "done", "writing")

    def __init__(self, sock: socket.socket):
        self.sock, self.fd = sock, sock.fileno()
        self.data = bytearray()  # grown in place: a client trickling a byte at a time costs no copying
        self.scanned = 0  # bytes of `data` already searched for the head's end
        self.out: collections.deque[memoryview] = collections.deque()  # shared bytes, never copied per client
        self.held = 0  # bytes in `out`
        self.timer: asyncio.TimerHandle | None = None
        self.streaming = self.done = self.writing = False  # an event stream; the answer all given; a writer set


def listen(addr: str, port: int) -> socket.socket:
    """A listening, non-blocking socket on (addr, port) (port 0: a free one)."""
    listener = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((addr, port))
        listener.listen(socket.SOMAXCONN)  # a deep queue: accepting is quick, a dropped SYN waits a second
        listener.setblocking(False)
    except OSError:
        listener.close()
        raise
    return listener


class Held:
    """The connections held: the answers and events written to them within the budget, their deadlines, their
    close, and the count of those cut short (Core adds accepting and reading)."""

    def __init__(self, name: str, policy: Policy, words: dict[str, str], log: logging.Logger):
        self.name, self.policy, self.log = name, policy, log
        self.room: Room[Connection] = Room(policy.limit)  # oldest first
        self.cut_short = CutShort(name, {**words, **WORDS}, log)
        self.unsent = 0  # bytes written for clients, not yet taken by their sockets
        self.loop: asyncio.AbstractEventLoop | None = None
        self.reporting: asyncio.TimerHandle | None = None

    @property
    def streams(self) -> list[Connection]:
        return [conn for conn in self.room if conn.streaming]

    def _guarded(self, conn: Connection, step: Callable[[Connection], None]) -> None:
        """`step`, a failure of which ends that connection alone (counted, its traceback logged once a period)."""
        try:
            step(conn)
        except Exception:
            self._failed(conn)

    def _failed(self, conn: Connection) -> None:
        if self.count("failed") == 1:
            self.log.exception("%s: a connection failed; it is closed, the others are served", self.name)
        self.drop(conn, None)

    # --- writing -----------------------------------------------------------------------------------------------
    def answer(self, conn: Connection, data: bytes) -> None:
        """Send `data`, the whole answer; the connection is closed once it is sent (or at its deadline)."""
        if conn not in self.room:
            return  # closed meanwhile (room made, or the client went away)
        assert self.loop is not None
        self.room.mark(conn, WORKING)
        self.loop.remove_reader(conn.fd)  # one answer to a connection: what else it sends is not read
        conn.done = True
        if self.policy.answer_time is not None:
            if conn.timer is not None:
                conn.timer.cancel()
            conn.timer = self.loop.call_later(self.policy.answer_time, self._expired, conn, False)
        self._write(conn, data)

    def broadcast(self, data: bytes) -> None:
        """`data` to every event stream; a stream holding more than its share is cut, and past the total the
        clients holding the most."""
        for conn in self.streams:
            if conn not in self.room:
                continue  # cut for room already
            if self.policy.budget.over_client(conn.held):
                self.drop(conn, "slow")  # what it did not read is dropped with it: memory and descriptor now
                continue
            self._write(conn, data)

    def _write(self, conn: Connection, data: bytes) -> None:
        if self.unsent + len(data) > self.policy.budget.total:  # clients that do not read: the slowest are cut
            for slowest in self.policy.budget.to_cut({c: c.held for c in self.room}, len(data)):
                self.drop(slowest, "slow")
        if conn not in self.room:
            return  # itself the slowest reader
        if data:
            conn.out.append(memoryview(data))
            conn.held += len(data)
            self.unsent += len(data)
        self._guarded(conn, self._flush)

    def _flush(self, conn: Connection) -> None:
        """Send what the socket takes now (a client that does not read waits alone); close once all is sent."""
        assert self.loop is not None
        while conn.out:
            try:
                sent = conn.sock.send(conn.out[0])
            except BlockingIOError:
                break
            except OSError:
                self.drop(conn, None)
                return
            conn.held -= sent
            self.unsent -= sent
            if sent == len(conn.out[0]):
                conn.out.popleft()
            else:
                conn.out[0] = conn.out[0][sent:]
        if conn.out and not conn.writing:
            self.loop.add_writer(conn.fd, self._guarded, conn, self._flush)
            conn.writing = True
        elif not conn.out and conn.writing:
            self.loop.remove_writer(conn.fd)
            conn.writing = False
        if not conn.out and conn.done:
            self._finish(conn)

    def _finish(self, conn: Connection) -> None:
        try:  # what the client sent beyond the head: read, so that closing does not reset the answer
            for _ in range(4):
                if not conn.sock.recv(READ_SIZE):
                    break
        except OSError:
            pass
        self.drop(conn, None)

    # --- closing -----------------------------------------------------------------------------------------------
    def _expired(self, conn: Connection, asking: bool = True) -> None:
        """The deadline: a request not whole in time is answered `late` where the server has one; else the
        connection is closed."""
        conn.timer = None
        if conn not in self.room:
            return
        if asking and self.policy.late is not None and not conn.done:
            self.count("timeout")
            self.answer(conn, self.policy.late)
            return
        self.drop(conn, "timeout" if asking or self.policy.late is None else None)

    def drop(self, conn: Connection, reason: str | None) -> None:
        if conn not in self.room:
            return  # already closed
        self.room.remove(conn)
        self.unsent -= conn.held
        conn.out.clear()
        conn.held = 0
        if reason is not None:  # counted before the client can see the close
            self.count(reason)
        if conn.timer is not None:
            conn.timer.cancel()
        if self.loop is not None:
            self.loop.remove_reader(conn.fd)
            self.loop.remove_writer(conn.fd)
        conn.sock.close()

    def count(self, reason: str) -> int:
        """A connection cut short for `reason` (summed up in one line a period at most)."""
        n = self.cut_short.count(reason)
        if self.reporting is None and self.loop is not None and (due := self.cut_short.due()) is not None:
            self.reporting = self.loop.call_later(max(0.0, due - time.monotonic()), self._report)
        return n

    def _report(self) -> None:
        self.reporting = None
        self.cut_short.report(time.monotonic())


class Core(Held):
    """Serve `handle` on `listener` from the running loop (start), under `policy`."""

    def __init__(self, name: str, handle: Handle, policy: Policy, words: dict[str, str], log: logging.Logger):
        super().__init__(name, policy, words, log)
        self.handle = handle
        self.accepted = 0
        self.listener: socket.socket | None = None
        self.tasks: set[asyncio.Task] = set()

    def start(self, listener: socket.socket) -> None:
        self.loop, self.listener = asyncio.get_running_loop(), listener
        self.loop.add_reader(listener, self._accept)

    def close(self) -> None:
        """Stop accepting; close every connection and the listener (on the loop's thread)."""
        if self.listener is not None and self.loop is not None:
            self.loop.remove_reader(self.listener)
            self.listener.close()
        for conn in list(self.room):
            self.drop(conn, None)
        for task in list(self.tasks):
            task.cancel()
        if self.reporting is not None:
            self.reporting.cancel()
        self.cut_short.report(math.inf)

    # --- accepting ---------------------------------------------------------------------------------------------
    def _accept(self) -> None:
        assert self.listener is not None and self.loop is not None
        for _ in range(ACCEPTS_PER_ROUND):
            try:
                sock, _ = self.listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno not in STARVED:
                    continue  # that client gave up (ECONNABORTED, ...)
                if self.room:  # free a descriptor of our own, then try again
                    self.drop(next(iter(self.room)), "starved")
                    continue
                self.count("paused")
                self.loop.remove_reader(self.listener)
                self.loop.call_later(DESCRIPTOR_PAUSE, self._resume)
                return
            if (victim := self.room.victim()) is not None:
                self.drop(victim, "evicted")
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
            except OSError:  # that client is gone already
                sock.close()
                continue
            self._admit(Connection(sock))

    def _resume(self) -> None:
        if self.listener is not None and self.listener.fileno() >= 0 and self.loop is not None:
            self.loop.add_reader(self.listener, self._accept)

    def _admit(self, conn: Connection) -> None:
        assert self.loop is not None
        self.room.add(conn)
        self.accepted += 1
        conn.timer = self.loop.call_later(self.policy.timeout, self._expired, conn)
        self.loop.add_reader(conn.fd, self._readable, conn)
        self._readable(conn)  # the request often came with the connection

    # --- reading a request -------------------------------------------------------------------------------------
    def _readable(self, conn: Connection) -> None:
        try:
            data = conn.sock.recv(READ_SIZE if conn.streaming else self._wanted(conn))
        except BlockingIOError:
            return
        except OSError:
            data = b""  # the client went away
        if not data:
            self.drop(conn, None)
        elif not conn.streaming:  # what a page sends on its stream is ignored
            conn.data += data
            self._guarded(conn, self._parse)

    def _wanted(self, conn: Connection) -> int:
        return max(1, HEAD_LIMIT + 1 - len(conn.data)) if self.room.state(conn) != WORKING else READ_SIZE

    def _parse(self, conn: Connection) -> None:
        end = head_end(conn.data, max(0, conn.scanned - 2))
        if end < 0 and len(conn.data) <= HEAD_LIMIT:
            conn.scanned = len(conn.data)
            return  # more to come
        try:
            if end < 0 or end > HEAD_LIMIT:
                raise HeadError(431, f"request head over {HEAD_LIMIT} bytes")
            head = parse(conn.data[:end])
            length = self._body_length(head)
        except HeadError as bad:
            self.count("refused")
            self.answer(conn, self.policy.refuse(bad.status, bad.reason))
            return
        self.room.mark(conn, WORKING)  # a whole head: no longer idle
        if len(conn.data) - end < length:
            return  # the body is still coming
        body = bytes(conn.data[end : end + length])
        assert self.loop is not None
        self.loop.remove_reader(conn.fd)
        if self.policy.answer_time is not None and conn.timer is not None:
            conn.timer.cancel()  # the request is whole; the answer gets its own time
            conn.timer = None
        conn.data = bytearray()
        if (pending := self.handle(conn, head, body)) is not None:
            task = self.loop.create_task(self._await(conn, pending))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    def _body_length(self, head: Head) -> int:
        limit = self.policy.body_limit
        if limit is None or head.method != "POST":
            return 0
        if "transfer-encoding" in head.headers:
            raise HeadError(411, "send a Content-Length")
        if head.content_length > limit:
            raise HeadError(413, f"a body of at most {limit} bytes")
        return head.content_length

    async def _await(self, conn: Connection, pending: Awaitable[None]) -> None:
        try:
            await pending
        except asyncio.CancelledError:
            raise
        except Exception:
            self._failed(conn)

    # --- an event stream ---------------------------------------------------------------------------------------
    def stream(self, conn: Connection, first: bytes) -> None:
        """Make `conn` an event stream: `first`, then every broadcast, until one side closes it."""
        if conn not in self.room:
            return
        assert self.loop is not None
        streams = self.streams
        if self.policy.max_streams is not None and len(streams) >= self.policy.max_streams:
            self.drop(streams[0], "evicted")  # the oldest page: its browser reconnects
        if conn.timer is not None:
            conn.timer.cancel()
            conn.timer = None
        conn.streaming = True
        self.room.mark(conn, STREAM)
        self.loop.add_reader(conn.fd, self._readable, conn)  # to hear the page go away
        self._write(conn, first)
