"""A small HTTP/1.1 server for a WSGI app, on one thread with one selector: what the metrics port runs on.

Why not wsgiref's threading server: a thread per connection, each waiting on a client that may never speak, let
twenty idle clients hold every slot and delay a scrape by seconds. Here a connection costs a descriptor and a
buffer, never a thread; only a whole request head reaches the app; every connection has one deadline for its
whole exchange; answers are written without waiting on any other client; and when the connections allowed are all
open, a new one closes the oldest idle one (a real exchange takes milliseconds, so the oldest is the one stalled),
so a scrape always gets in; past a byte budget, the clients holding the most unread bytes are cut. That policy and
the request-head parser are the collector's one server core (net/server.py, net/head.py), which the monitor keeps
too. The app's answers are small and quick (prometheus_client's exposition, a health line), so
they are made on the server's thread. Every answer closes its connection (`Connection: close`).

This module keeps the connections and moves their bytes; reading a request head and writing an answer is
`httpwire.py`'s.
"""

from __future__ import annotations

import collections
import errno
import logging
import math
import resource
import selectors
import socket
import threading
import time
from typing import Any

from ..net.server import DEADLINE, HEAD_LIMIT, SEND_BUFFER, WORKING, Budget, CutShort, Room
from ..sdk.redaction import clip
from .httpwire import PLAIN, Answer, Refused, WsgiApp, environ, head_end, response, run_app

log = logging.getLogger("collector.daemon")

MAX_CONNECTIONS = 1024  # connections held open at once, at most; fewer under a low descriptor limit
MIN_CONNECTIONS = 16
DESCRIPTOR_SHARE = 4  # the metrics port holds at most a quarter of the process's descriptor limit
CONNECTION_TIMEOUT = DEADLINE  # seconds from accept to the last byte of the answer; then the connection is closed
UNSENT_LIMIT = 16 * 2**20  # bytes of answers held for clients slow to read them; past it the slowest are cut
ACCEPTS_PER_ROUND = 64  # accepted in a row before the connections already open are read again
DESCRIPTOR_PAUSE = 0.5  # seconds the port stops accepting when the process has no descriptor left


def connection_budget() -> int:
    """Connections the metrics port holds at once: a share of the descriptor limit, within fixed bounds."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(MIN_CONNECTIONS, min(MAX_CONNECTIONS, soft // DESCRIPTOR_SHARE))


class _Connection:
    __slots__ = ("sock", "deadline", "head", "out")

    def __init__(self, sock: socket.socket, deadline: float):
        self.sock, self.deadline = sock, deadline
        self.head = bytearray()  # grown in place: a client trickling a byte at a time costs no copying
        self.out: memoryview | None = None  # the answer still to send; None while the head is being read


def cut_short(limit: int, timeout: float) -> CutShort:
    """The metrics port's count of connections cut short, and its words for them."""
    words = {
        "evicted": f"closed to make room for newer ones ({limit} open at most)",
        "timeout": f"not done within {timeout:g}s",
        "refused": f"refused (malformed, or a head over {HEAD_LIMIT} bytes)",
        "slow": f"closed for reading too slowly ({UNSENT_LIMIT} bytes waiting for all at most)",
        "failed": "answered 500 (a failure of the collector's own, logged)",
        "starved": "closed to free a file descriptor (the process had none left)",
        "paused": f"accepting paused {{n}} times for {DESCRIPTOR_PAUSE:g}s (no descriptor left)",
    }
    return CutShort("metrics", words, log)


class HttpServer:
    """A WSGI app on (addr, port), served by one daemon thread; port 0 picks a free one (see .port). At most
    `max_connections` are open at once (default: `connection_budget()`), each with `timeout` seconds from accept
    to the end of its answer."""

    def __init__(
        self, app: WsgiApp, addr: str, port: int, max_connections: int | None = None, timeout: float | None = None
    ):
        self.app = app
        self.limit = max(1, max_connections or connection_budget())
        self.timeout = CONNECTION_TIMEOUT if timeout is None else timeout
        self.listener, self.waker, self.wakeup, self.selector = _open(addr, port)
        self.addr, self.port = addr, self.listener.getsockname()[1]
        self.connections: Room[_Connection] = Room(self.limit)  # oldest first
        self.budget = Budget(UNSENT_LIMIT)
        self.accepted = 0
        self.unsent = 0  # bytes of answers not yet taken by their sockets
        self.cut_short = cut_short(self.limit, self.timeout)
        self.paused_until: float | None = None
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, name="metrics", daemon=True)
        self.thread.start()

    @property
    def closed(self) -> collections.Counter[str]:
        """Connections cut short since the start, by reason."""
        return self.cut_short.closed

    def close(self) -> None:
        """Stop serving: the thread closes every connection and the port (waited for up to 10 s, should an answer
        be in the making)."""
        self.stopping = True
        try:
            self.waker.send(b"x")
        except OSError:
            pass  # already stopped, or the wake-up is pending anyway
        self.thread.join(10)

    # --- the loop: accept, read and write what is ready, expire --------------------------------------------------
    def _serve(self) -> None:
        try:
            while not self.stopping:
                self._round()
        except Exception:
            log.exception("metrics: the HTTP server stopped; /metrics, /healthz and /readyz no longer answer")
        finally:
            for conn in list(self.connections):
                self._drop(conn, None)
            self._report(math.inf)
            self.selector.close()
            for sock in (self.listener, self.waker, self.wakeup):
                sock.close()

    def _round(self) -> None:
        accept = False
        for key, _ in self.selector.select(self._wait()):
            if key.data == "accept":
                accept = True  # after the open connections: what they sent is read first
            elif isinstance(key.data, _Connection):
                self._guarded_step(key.data)
        if accept and not self.stopping:
            self._accept()
        now = time.monotonic()
        self._expire(now)
        if self.paused_until is not None and now >= self.paused_until:
            self.paused_until = None
            self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        self._report(now)

    def _wait(self) -> float | None:
        """Seconds until something is due: the oldest connection's deadline, the resumption, the summary line."""
        oldest = next(iter(self.connections), None)
        due = [] if oldest is None else [oldest.deadline]
        if self.paused_until is not None:
            due.append(self.paused_until)
        if (report := self.cut_short.due()) is not None:
            due.append(report)
        return max(0.0, min(due) - time.monotonic()) if due else None

    def _accept(self) -> None:
        for _ in range(ACCEPTS_PER_ROUND):
            try:
                sock, _ = self.listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    continue  # that client gave up (ECONNABORTED, ...)
                if self.connections:  # free a descriptor of our own, then try again
                    self._drop(next(iter(self.connections)), "starved")
                    continue
                self._count("paused")
                self.selector.unregister(self.listener)
                self.paused_until = time.monotonic() + DESCRIPTOR_PAUSE
                return
            if (victim := self.connections.victim()) is not None:
                self._drop(victim, "evicted")
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
            except OSError:  # that client is gone already
                sock.close()
                continue
            conn = _Connection(sock, time.monotonic() + self.timeout)
            self.connections.add(conn)
            self.selector.register(sock, selectors.EVENT_READ, conn)
            self.accepted += 1
            self._guarded_step(conn)  # the request often came with the connection

    def _expire(self, now: float) -> None:
        while self.connections:
            conn = next(iter(self.connections))  # every connection has the same timeout: the oldest is due first
            if conn.deadline > now:
                return
            self._drop(conn, "timeout")

    def _drop(self, conn: _Connection, reason: str | None) -> None:
        if conn not in self.connections:
            return  # already closed
        self.connections.remove(conn)
        self.unsent -= len(conn.out or b"")
        if reason is not None:  # counted before the client can see the close
            self._count(reason)
        self.selector.unregister(conn.sock)
        conn.sock.close()

    # --- one connection: its head read, its answer made and sent ------------------------------------------------
    def _guarded_step(self, conn: _Connection) -> None:
        """`_step`, a failure of which ends that connection alone (counted, its traceback logged once a period):
        the server goes on answering everyone else."""
        try:
            self._step(conn)
        except Exception:
            if self._count("failed") == 1:
                log.exception("metrics: a connection failed; it is closed, the others are served")
            self._drop(conn, None)

    def _step(self, conn: _Connection) -> None:
        """Read more of the head, or send more of the answer, as far as the socket allows now."""
        try:
            if conn.out is not None:
                self._send(conn)
                return
            data = conn.sock.recv(HEAD_LIMIT + 1 - len(conn.head))
        except BlockingIOError:
            return
        except OSError:
            self._drop(conn, None)  # the client went away
            return
        if not data:
            self._drop(conn, None)
            return
        start = max(0, len(conn.head) - 2)
        conn.head += data
        end = head_end(conn.head, start)
        if end < 0 and len(conn.head) <= HEAD_LIMIT:
            return  # more to come
        try:
            if end < 0 or end > HEAD_LIMIT:
                raise Refused("431 Request Header Fields Too Large", f"request head over {HEAD_LIMIT} bytes")
            env = environ(conn.head[:end], self.addr, self.port)
        except Refused as refused:
            self._count("refused")
            self._answer(conn, *refused.answer())
            return
        head_only = env["REQUEST_METHOD"] == "HEAD"
        if head_only:
            env["REQUEST_METHOD"] = "GET"  # HEAD is answered as GET, without the body
        self._answer(conn, *self._run(env), send_body=not head_only)

    def _run(self, env: dict[str, Any]) -> Answer:
        """The app's answer to a whole request; 500 if the app fails."""
        try:
            started, body = run_app(self.app, env)
        except Exception:
            if self._count("failed") == 1:  # one traceback per summary period
                log.exception("metrics: answering %r %r failed", env["REQUEST_METHOD"], clip(env["PATH_INFO"], 100))
            return "500 Internal Server Error", PLAIN, b"internal error\n"
        status, headers = started
        return status, headers, body

    def _answer(
        self, conn: _Connection, status: str, headers: list[tuple[str, str]], body: bytes, send_body: bool = True
    ) -> None:
        out = memoryview(response(status, headers, body, send_body))
        if self.unsent + len(out) > self.budget.total:  # clients that do not read hold memory: the slowest are cut
            for slowest in self.budget.to_cut({c: len(c.out or b"") for c in self.connections}, len(out)):
                self._drop(slowest, "slow")
        conn.out = out
        self.connections.mark(conn, WORKING)
        self.unsent += len(out)
        self.selector.modify(conn.sock, selectors.EVENT_WRITE, conn)
        try:
            self._send(conn)
        except BlockingIOError:
            pass
        except OSError:
            self._drop(conn, None)

    def _send(self, conn: _Connection) -> None:
        """Send what the socket takes now (a client that does not read waits alone); close once all is sent."""
        assert conn.out is not None
        sent = conn.sock.send(conn.out)
        conn.out = conn.out[sent:]
        self.unsent -= sent
        if conn.out:
            return
        try:  # what the client sent beyond the head: read, so that closing does not reset the answer
            for _ in range(4):
                if not conn.sock.recv(65536):
                    break
        except OSError:
            pass
        self._drop(conn, None)

    def _count(self, reason: str) -> int:
        return self.cut_short.count(reason)

    def _report(self, now: float) -> None:
        self.cut_short.report(now)


def _open(addr: str, port: int) -> tuple[socket.socket, socket.socket, socket.socket, selectors.BaseSelector]:
    """The listening socket on (addr, port), a socket pair to wake the loop with, and the selector watching both
    (all closed again if one cannot be made)."""
    opened: list[socket.socket | selectors.BaseSelector] = []
    try:
        listener = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_STREAM)
        opened.append(listener)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((addr, port))
        listener.listen(socket.SOMAXCONN)  # a deep queue: accepting is quick, a dropped SYN waits a second
        listener.setblocking(False)
        waker, wakeup = socket.socketpair()
        opened += [waker, wakeup]
        waker.setblocking(False)
        selector = selectors.DefaultSelector()
        opened.append(selector)
        selector.register(listener, selectors.EVENT_READ, "accept")
        selector.register(wakeup, selectors.EVENT_READ, "wake")
    except OSError:
        for thing in opened:
            thing.close()
        raise
    return listener, waker, wakeup, selector
