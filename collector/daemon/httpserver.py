"""A small HTTP/1.1 server for a WSGI app: what the metrics port runs on, the collector's one server core
(net/core.py, which the monitor runs on too) on an asyncio loop of its own daemon thread.

Why not wsgiref's threading server: a thread per connection, each waiting on a client that may never speak, let
twenty idle clients hold every slot and delay a scrape by seconds. Here a connection costs a descriptor and a
buffer, never a thread; only a whole request head reaches the app; every connection has one deadline for its
whole exchange; answers are written without waiting on any other client; and when the connections allowed are all
open, a new one closes the oldest idle one (a real exchange takes milliseconds, so the oldest is the one stalled),
so a scrape always gets in; past a byte budget, the clients holding the most unread bytes are cut. The app's
answers are small and quick (prometheus_client's exposition, a health line), so they are made on the server's
thread, never on one of the collector's. Every answer closes its connection (`Connection: close`).

This module runs the core and asks the app; turning a request head into a WSGI environ and an answer into bytes is
`httpwire.py`'s.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import resource
import threading
from typing import Any

from ..net.core import Connection, Core, Policy, listen
from ..net.head import Head
from ..net.server import DEADLINE, HEAD_LIMIT, Budget
from ..sdk.redaction import clip
from .httpwire import PLAIN, Answer, WsgiApp, environ, refusal, response, run_app

__all__ = ["HEAD_LIMIT", "HttpServer", "connection_budget"]

log = logging.getLogger("collector.daemon")

MAX_CONNECTIONS = 1024  # connections held open at once, at most; fewer under a low descriptor limit
MIN_CONNECTIONS = 16
DESCRIPTOR_SHARE = 4  # the metrics port holds at most a quarter of the process's descriptor limit
CONNECTION_TIMEOUT = DEADLINE  # seconds from accept to the last byte of the answer; then the connection is closed
UNSENT_LIMIT = 16 * 2**20  # bytes of answers held for clients slow to read them; past it the slowest are cut


def connection_budget() -> int:
    """Connections the metrics port holds at once: a share of the descriptor limit, within fixed bounds."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(MIN_CONNECTIONS, min(MAX_CONNECTIONS, soft // DESCRIPTOR_SHARE))


def words(limit: int, timeout: float) -> dict[str, str]:
    """The metrics port's words for the connections it cut short."""
    return {
        "evicted": f"closed to make room for newer ones ({limit} open at most)",
        "timeout": f"not done within {timeout:g}s",
        "refused": f"refused (malformed, or a head over {HEAD_LIMIT} bytes)",
        "slow": f"closed for reading too slowly ({UNSENT_LIMIT} bytes waiting for all at most)",
        "failed": "answered 500 (a failure of the collector's own, logged)",
    }


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
        listener = listen(addr, port)
        self.addr, self.port = addr, listener.getsockname()[1]
        policy = Policy(self.limit, self.timeout, Budget(UNSENT_LIMIT), refuse=refusal)
        self.core = Core("metrics", self._handle, policy, words(self.limit, self.timeout), log)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve, args=(listener,), name="metrics", daemon=True)
        self.thread.start()

    @property
    def accepted(self) -> int:
        return self.core.accepted

    @property
    def unsent(self) -> int:
        """Bytes of answers not yet taken by their sockets."""
        return self.core.unsent

    @property
    def closed(self) -> collections.Counter[str]:
        """Connections cut short since the start, by reason."""
        return self.core.cut_short.closed

    def close(self) -> None:
        """Stop serving: the thread closes every connection and the port (waited for up to 10 s, should an answer
        be in the making)."""
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:
            pass  # already stopped
        self.thread.join(10)

    def _serve(self, listener: Any) -> None:
        try:
            self.loop.call_soon(self.core.start, listener)
            self.loop.run_forever()
        except Exception:
            log.exception("metrics: the HTTP server stopped; /metrics, /healthz and /readyz no longer answer")
        finally:
            self.core.close()
            listener.close()
            self.loop.close()

    def _handle(self, conn: Connection, head: Head, body: bytes) -> None:
        """A whole request: the app's answer (HEAD is answered as GET, without the body)."""
        env = environ(head, self.addr, self.port)
        head_only = env["REQUEST_METHOD"] == "HEAD"
        if head_only:
            env["REQUEST_METHOD"] = "GET"
        self.core.answer(conn, response(*self._run(env), send_body=not head_only))

    def _run(self, env: dict[str, Any]) -> Answer:
        """The app's answer to a whole request; 500 if the app fails."""
        try:
            started, body = run_app(self.app, env)
        except Exception:
            if self.core.count("failed") == 1:  # one traceback per summary period
                log.exception("metrics: answering %r %r failed", env["REQUEST_METHOD"], clip(env["PATH_INFO"], 100))
            return "500 Internal Server Error", PLAIN, b"internal error\n"
        status, headers = started
        return status, headers, body
