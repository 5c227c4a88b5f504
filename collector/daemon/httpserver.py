"""A small HTTP/1.1 server for a WSGI app, on one thread with one selector: what the metrics port runs on.

Why not wsgiref's threading server: a thread per connection, each waiting on a client that may never speak, let
twenty idle clients hold every slot and delay a scrape by seconds. Here a connection costs a descriptor and a
buffer, never a thread; only a whole request head reaches the app; every connection has one deadline for its
whole exchange; answers are written without waiting on any other client; and when the connections allowed are all
open, a new one closes the oldest (a real exchange takes milliseconds, so the oldest is the one stalled), so a
scrape always gets in. The app's answers are small and quick (prometheus_client's exposition, a health line), so
they are made on the server's thread. Every answer closes its connection (`Connection: close`).
"""

from __future__ import annotations

import collections
import errno
import io
import logging
import math
import re
import resource
import selectors
import socket
import sys
import threading
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Iterable
from email.utils import formatdate
from typing import Any

from ..sdk.redaction import clip

log = logging.getLogger("collector.daemon")
WsgiApp = Callable[[dict, Callable], Iterable[bytes]]

MAX_CONNECTIONS = 1024  # connections held open at once, at most; fewer under a low descriptor limit
MIN_CONNECTIONS = 16
DESCRIPTOR_SHARE = 4  # the metrics port holds at most a quarter of the process's descriptor limit
CONNECTION_TIMEOUT = 10.0  # seconds from accept to the last byte of the answer; then the connection is closed
HEAD_LIMIT = 8192  # bytes of request line and headers; a longer head is answered 431
UNSENT_LIMIT = 16 * 2**20  # bytes of answers held for clients slow to read them; past it the oldest are cut
SEND_BUFFER = 64 * 1024  # the kernel's buffer per connection (it doubles it), not autotuned up to megabytes
ACCEPTS_PER_ROUND = 64  # accepted in a row before the connections already open are read again
REPORT_EVERY = 60.0  # connections cut short are summed up in one log line at most this often
DESCRIPTOR_PAUSE = 0.5  # seconds the port stops accepting when the process has no descriptor left


def connection_budget() -> int:
    """Connections the metrics port holds at once: a share of the descriptor limit, within fixed bounds."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(MIN_CONNECTIONS, min(MAX_CONNECTIONS, soft // DESCRIPTOR_SHARE))


class _Refused(Exception):
    """A request head the server answers with an error of its own, without asking the app."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


class _Connection:
    __slots__ = ("sock", "deadline", "head", "out")

    def __init__(self, sock: socket.socket, deadline: float):
        self.sock, self.deadline = sock, deadline
        self.head = bytearray()  # grown in place: a client trickling a byte at a time costs no copying
        self.out: memoryview | None = None  # the answer still to send; None while the head is being read


def _head_end(data: bytearray, start: int) -> int:
    """Where the request head in `data` ends (after its empty line), or -1; lines may end in CRLF or LF."""
    ends = [i + n for i, n in ((data.find(b"\n\r\n", start), 3), (data.find(b"\n\n", start), 2)) if i >= 0]
    return min(ends, default=-1)


TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


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
        opened: list[socket.socket | selectors.BaseSelector] = []
        try:
            listener = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_STREAM)
            opened.append(listener)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((addr, port))
            listener.listen(socket.SOMAXCONN)  # a deep queue: accepting is quick, a dropped SYN waits a second
            listener.setblocking(False)
            self.waker, self.wakeup = socket.socketpair()
            opened += [self.waker, self.wakeup]
            self.waker.setblocking(False)
            self.selector = selectors.DefaultSelector()
            opened.append(self.selector)
            self.selector.register(listener, selectors.EVENT_READ, "accept")
            self.selector.register(self.wakeup, selectors.EVENT_READ, "wake")
        except OSError:
            for thing in opened:
                thing.close()
            raise
        self.listener, self.addr, self.port = listener, addr, listener.getsockname()[1]
        self.connections: OrderedDict[_Connection, None] = OrderedDict()  # oldest first
        self.accepted = 0
        self.unsent = 0  # bytes of answers not yet taken by their sockets
        self.closed: collections.Counter[str] = collections.Counter()  # cut short, by reason, since the start
        self.unreported: collections.Counter[str] = collections.Counter()
        self.reported_at = -math.inf
        self.paused_until: float | None = None
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, name="metrics", daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop serving: the thread closes every connection and the port (waited for up to 10 s, should an answer
        be in the making)."""
        self.stopping = True
        try:
            self.waker.send(b"x")
        except OSError:
            pass  # already stopped, or the wake-up is pending anyway
        self.thread.join(10)

    def _serve(self) -> None:
        try:
            while not self.stopping:
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
        except Exception:
            log.exception("metrics: the HTTP server stopped; /metrics, /healthz and /readyz no longer answer")
        finally:
            for conn in list(self.connections):
                self._drop(conn, None)
            self._report(math.inf)
            self.selector.close()
            for sock in (self.listener, self.waker, self.wakeup):
                sock.close()

    def _wait(self) -> float | None:
        """Seconds until something is due: the oldest connection's deadline, the resumption, the summary line."""
        oldest = next(iter(self.connections), None)
        due = [] if oldest is None else [oldest.deadline]
        if self.paused_until is not None:
            due.append(self.paused_until)
        if self.unreported:
            due.append(self.reported_at + REPORT_EVERY)
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
            if len(self.connections) >= self.limit:
                self._drop(next(iter(self.connections)), "evicted")
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
            except OSError:  # that client is gone already
                sock.close()
                continue
            conn = _Connection(sock, time.monotonic() + self.timeout)
            self.connections[conn] = None
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
        del self.connections[conn]
        self.unsent -= len(conn.out or b"")
        if reason is not None:  # counted before the client can see the close
            self._count(reason)
        self.selector.unregister(conn.sock)
        conn.sock.close()

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
        end = _head_end(conn.head, start)
        if end < 0 and len(conn.head) <= HEAD_LIMIT:
            return  # more to come
        if end < 0 or end > HEAD_LIMIT:
            self._refuse(conn, _Refused("431 Request Header Fields Too Large", f"request head over {HEAD_LIMIT} bytes"))
            return
        try:
            environ = self._environ(conn.head[:end])
        except _Refused as refused:
            self._refuse(conn, refused)
            return
        head_only = environ["REQUEST_METHOD"] == "HEAD"
        if head_only:
            environ["REQUEST_METHOD"] = "GET"  # HEAD is answered as GET, without the body
        self._answer(conn, *self._run(environ), send_body=not head_only)

    def _refuse(self, conn: _Connection, refused: _Refused) -> None:
        self._count("refused")
        body = refused.reason.encode() + b"\n"
        self._answer(conn, refused.status, [("Content-Type", "text/plain; charset=utf-8")], body)

    def _environ(self, head: bytearray) -> dict[str, Any]:
        lines = head.decode("latin-1").split("\n")
        parts = lines[0].rstrip("\r").split(" ")
        if len(parts) != 3 or not TOKEN.fullmatch(parts[0]) or not re.fullmatch(r"HTTP/1\.[0-9]", parts[2]):
            raise _Refused("400 Bad Request", "not an HTTP/1.x request line")
        method, target, version = parts
        if target.lower().startswith(("http://", "https://")):  # the absolute form a proxy may send
            target = "/" + target.split("://", 1)[1].partition("/")[2]
        if not target.startswith("/"):
            raise _Refused("400 Bad Request", "the target is not a path")
        path, _, query = target.partition("?")
        environ: dict[str, Any] = {
            "REQUEST_METHOD": method,
            "SCRIPT_NAME": "",
            "PATH_INFO": urllib.parse.unquote(path, "iso-8859-1"),
            "QUERY_STRING": query,
            "SERVER_NAME": self.addr,
            "SERVER_PORT": str(self.port),
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
            line = line.rstrip("\r")
            if not line:
                continue
            name, colon, value = line.partition(":")
            if not colon or not TOKEN.fullmatch(name):
                raise _Refused("400 Bad Request", "a malformed header line")
            if "_" in name:
                continue  # as wsgiref: X_Y would pass for X-Y
            key = name.upper().replace("-", "_")
            key = key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else "HTTP_" + key
            value = value.strip(" \t")
            environ[key] = environ[key] + "," + value if key in environ else value
        return environ

    def _run(self, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
        """The app's answer to a whole request."""
        started: list[Any] = []
        written: list[bytes] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable:
            started[:] = [status, headers]
            return written.append

        try:
            result = self.app(environ, start_response)
            try:
                body = b"".join([*written, *result])
            finally:
                getattr(result, "close", lambda: None)()
        except Exception:
            if self._count("failed") == 1:  # one traceback per summary period
                log.exception(
                    "metrics: answering %r %r failed", environ["REQUEST_METHOD"], clip(environ["PATH_INFO"], 100)
                )
            return "500 Internal Server Error", [("Content-Type", "text/plain; charset=utf-8")], b"internal error\n"
        status, headers = started
        return status, headers, body

    def _answer(
        self, conn: _Connection, status: str, headers: list[tuple[str, str]], body: bytes, send_body: bool = True
    ) -> None:
        own = ("content-length", "connection", "transfer-encoding", "date")
        lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers if k.lower() not in own)]
        lines += [f"Date: {formatdate(usegmt=True)}", f"Content-Length: {len(body)}", "Connection: close"]
        conn.out = memoryview(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body if send_body else b""))
        self.unsent += len(conn.out)
        self.selector.modify(conn.sock, selectors.EVENT_WRITE, conn)
        try:
            self._send(conn)
        except BlockingIOError:
            pass
        except OSError:
            self._drop(conn, None)
        while self.unsent > UNSENT_LIMIT:  # clients that do not read hold the memory: the oldest ones are cut
            slowest = next((c for c in self.connections if c.out and c is not conn), None)
            if slowest is None:
                break
            self._drop(slowest, "evicted")

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
        """A connection cut short for `reason`: counted since the start and for the next summary line (returned)."""
        self.closed[reason] += 1
        self.unreported[reason] += 1
        return self.unreported[reason]

    def _report(self, now: float) -> None:
        """One line for the connections cut short since the last one (none for a quiet port)."""
        if not self.unreported or now - self.reported_at < REPORT_EVERY:
            return
        counts = self.unreported
        words = {
            "evicted": f"closed to make room for newer ones ({self.limit} open at most)",
            "timeout": f"not done within {self.timeout:g}s",
            "refused": f"refused (malformed, or a head over {HEAD_LIMIT} bytes)",
            "failed": "answered 500 (a failure of the collector's own, logged)",
            "starved": "closed to free a file descriptor (the process had none left)",
        }
        parts = [f"{counts[reason]} {text}" for reason, text in words.items() if counts[reason]]
        if counts["paused"]:
            parts.append(f"accepting paused {counts['paused']} times for {DESCRIPTOR_PAUSE:g}s (no descriptor left)")
        log.warning("metrics: connections cut short: %s", "; ".join(parts))
        self.unreported = collections.Counter()
        self.reported_at = now
