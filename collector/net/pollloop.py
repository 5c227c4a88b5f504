"""Polls on an event loop: one thread, one event loop (uvloop's: libuv), HTTP/1.1 parsed by llhttp (httptools),
for the requests a connector declares as its poll (sdk/poll.py). The engine sends a normal-mode network's poll here
instead of waking a worker thread for it; an answer the connector must read (anything but the poll's "nothing
changed") is handed to a worker with the answer already read (`Answer`), so the request is not sent twice.

Why httptools: per 304 answer of GitHub's size, llhttp parses it in ~3 µs and h11 in ~46 µs (measured on the
2-core development machine); aiohttp (not measured) builds a request and a response object tree per exchange by
its design. Why uvloop: the same protocol API as asyncio's own loop, with its loop, timers and socket calls in C
(libuv); the lane's thread took 0.054–0.066 ms of CPU a poll on it against 0.076–0.089 on asyncio's (`new_loop`).
The lane does only what a poll needs, and leaves every other case to the session's path (sdk/http.py), which
behaves as it always did:

- **Addresses.** A host the collector does not trust is resolved once, every address checked (addresses.py's
  `Policy`, as connections.py does it), and a connection opened only to one that passed; none passed: `Unsent`.
- **TLS.** The authorities CA_BUNDLE names, or certifi's (as requests), the host's name checked.
- **The deadline.** HTTP_TIMEOUT bounds connecting, sending and the whole answer; the stop's cutoff brings it
  forward (`clamp`): `Expired` (the SDK's `Transient`, or `Interrupted` at the cutoff).
- **Caps.** At most MAX_HEADERS headers and MAX_HEAD_BYTES of head; the body as received at most `max_bytes` (an
  error answer past it keeps its status and headers and an empty body, as the session's path does; a 2xx past it is
  `TooLarge`).
- **Anything unusual** — no address passed, a connection that failed before an answer, an interim or unparseable
  answer, bytes after the answer, a redirect (the session follows it, checking each hop) — is `Unsent`: the run takes
  the session's path, which sends the request as before and says what went wrong in its own words.

A connection is kept for the next poll of its origin only after a clean exchange (the answer's framing ended where it
said, nothing after it, keep-alive). Proxies are not spoken here: with any proxy configured, every request takes the
session's path (sdk/http.py decides).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .addresses import Policy, is_public
from .pollwire import Answer, Exchange, Expired, TooLarge, Unsent

__all__ = ["Answer", "Expired", "Lane", "Outgoing", "TooLarge", "Unsent", "tls_context"]

IDLE_PER_ORIGIN = 64  # connections kept open per origin between polls
IDLE_TOTAL = 256  # and in all: a fleet of many origins (instances) keeps no more descriptors than this idle
log = logging.getLogger("collector.http")


@dataclass(frozen=True)
class Outgoing:
    """One request as bytes, and where it goes."""

    scheme: str
    host: str
    port: int
    head: bytes = field(repr=False)  # carries the credentials: never in a repr

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)


Done = Callable[[Answer | None, BaseException | None], object]


class Call:
    """One request on the lane, from `send` to `done`: its deadline (the loop's clock) and timer, its connection."""

    __slots__ = ("cutoff", "deadline", "done", "exchange", "outgoing", "over", "release", "task", "timer")

    def __init__(self, outgoing: Outgoing, done: Done, release: Callable[[], None], deadline: float, cutoff: bool):
        self.outgoing, self.done, self.release = outgoing, done, release
        self.deadline, self.cutoff = deadline, cutoff
        self.exchange: Exchange | None = None
        self.task: asyncio.Task | None = None  # connecting
        self.timer: asyncio.TimerHandle | None = None
        self.over = False


class Lane:
    """The event loop's thread and its connections. `send` may be called from any thread; `done(answer, error)` is
    called on the lane's thread (error: `Unsent`, `Expired`, `TooLarge`). A request on a kept-alive connection is
    callbacks only (no task): written, its answer parsed as it comes, ended by its answer or its timer."""

    def __init__(
        self, timeout: float, max_bytes: int, policy: Policy, tls: ssl.SSLContext | None, cutoff: float | None = None
    ):
        self.timeout, self.max_bytes, self.policy = timeout, max_bytes, policy
        self.tls = tls  # None until an https request needs it (a context costs 20-40 ms of CPU: the CA bundle read)
        self.cutoff = cutoff  # monotonic: the stop's
        self.generation = 0  # of the address policy: a connection opened under another is never reused
        self.closed = False
        self.idle: dict[tuple[str, str, int], list[Exchange]] = {}
        self.idle_count = 0  # connections in `idle` (closed ones too, until the bound makes room)
        self.inbox: collections.deque[tuple[Outgoing, Done, Callable[[], None]]] = collections.deque()
        self.woken = False
        self.cpu_seconds = 0.0
        self.calls: set[Call] = set()
        self.loop = new_loop()
        self.thread = threading.Thread(target=self._run, name="poll-lane", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.set_exception_handler(quiet_handler)
        self.loop.run_forever()

    # --- from other threads -------------------------------------------------------------------------------
    def send(self, outgoing: Outgoing, done: Done, release: Callable[[], None]) -> None:
        """Send `outgoing` on the lane; `release()` once its answer is read (its request slot), then `done`. On a
        lane closed already, at once: `Unsent` (the session's path)."""
        if self.closed:
            settle(release, done, None, Unsent("the lane is closed"))
            return
        self.inbox.append((outgoing, done, release))
        if not self.woken:  # one wake-up (a byte on the loop's pipe) for every request queued meanwhile
            self.woken = True
            self.loop.call_soon_threadsafe(self._take)

    def configure(self, timeout: float, max_bytes: int, policy: Policy) -> None:
        """New settings (a reload), for the exchanges that begin after it; connections opened under another address
        policy are closed rather than reused."""
        self.timeout, self.max_bytes = timeout, max_bytes
        if policy != self.policy:
            self.policy = policy
            self.loop.call_soon_threadsafe(self._new_policy)

    def clamp(self, cutoff: float) -> None:
        """The collector is stopping: exchanges still running at `cutoff` (monotonic) are cut."""
        self.cutoff = cutoff if self.cutoff is None else min(self.cutoff, cutoff)
        self.loop.call_soon_threadsafe(self._clamp)

    def close(self) -> None:
        """Cut what runs and what waits to be sent, close the connections, end the thread; what is sent after it
        ends at once (`send`)."""
        self.closed = True
        if not self.loop.is_closed() and self.thread.is_alive():
            self.loop.call_soon_threadsafe(self._close)
            self.thread.join(timeout=5)
        while self.inbox:  # sent as it closed, never taken: ended here
            _, done, release = self.inbox.popleft()
            settle(release, done, None, Expired(True))

    # --- on the lane's thread -------------------------------------------------------------------------------
    def _take(self) -> None:
        self.woken = False
        while self.inbox:
            outgoing, done, release = self.inbox.popleft()
            try:
                self._start(outgoing, done, release)
            except Exception as exc:  # a bug of ours: that request alone takes the session's path
                log.error("poll lane: %s starting a request; it takes the session's path", type(exc).__name__)
                settle(release, done, None, Unsent("not started"))

    def _start(self, outgoing: Outgoing, done: Done, release: Callable[[], None]) -> None:
        now = time.monotonic()
        deadline, cutoff = now + self.timeout, False
        if self.cutoff is not None and self.cutoff < deadline:
            deadline, cutoff = self.cutoff, True
        call = Call(outgoing, done, release, self.loop.time() + (deadline - now), cutoff)
        self.calls.add(call)
        call.timer = self.loop.call_at(call.deadline, self._expire, call)
        exchange = self._idle(outgoing.origin)
        if exchange is None:
            call.task = self.loop.create_task(self._connect_then_ask(call))
        else:
            self._ask(call, exchange)

    def _ask(self, call: Call, exchange: Exchange) -> None:
        call.exchange = exchange
        transport = exchange.transport
        if exchange.broken or transport is None or transport.is_closing():  # lost before it was written
            self._end(call, None, Unsent("connection lost before the request was sent"))
            return
        exchange.begin(lambda answer, error: self._end(call, answer, error), self.max_bytes)
        transport.write(call.outgoing.head)

    async def _connect_then_ask(self, call: Call) -> None:
        try:
            exchange = await self._connect(call.outgoing)
        except asyncio.CancelledError:  # its deadline passed (`_expire` ended it)
            return
        except Unsent as exc:
            self._end(call, None, exc)
            return
        except (OSError, ssl.SSLError, UnicodeError, ValueError) as exc:
            self._end(call, None, Unsent(f"{type(exc).__name__}: {exc}"))
            return
        call.task = None
        if call.over:
            exchange.close()
        else:
            self._ask(call, exchange)

    def _end(self, call: Call, answer: Answer | None, error: BaseException | None) -> None:
        """The call is over (once): its connection kept or closed, its slot given back, `done` told."""
        if call.over:
            return
        call.over = True
        self.calls.discard(call)
        if call.timer is not None:
            call.timer.cancel()
        try:
            exchange = call.exchange
            if exchange is not None:
                if error is None and exchange.reusable and not exchange.broken:
                    self._keep(call.outgoing.origin, exchange)
                else:
                    exchange.close()
            status = answer.status if answer is not None else 0
            if 300 <= status < 400 and status != 304:  # followed on the session's path, each hop checked
                answer, error = None, Unsent(f"redirect {status}")
        finally:  # whatever happened above, the slot comes back and the run hears, once
            settle(call.release, call.done, answer, error)

    def _expire(self, call: Call) -> None:
        if call.over:
            return
        if call.task is not None:
            call.task.cancel()
        cutoff = call.cutoff or (self.cutoff is not None and self.cutoff <= time.monotonic() + 0.001)
        exchange, call.exchange = call.exchange, None
        self._end(call, None, Expired(cutoff))
        if exchange is not None:
            exchange.ended = None
            exchange.close()

    def _keep(self, origin: tuple[str, str, int], exchange: Exchange) -> None:
        if (
            exchange.generation != self.generation  # opened under an address policy a reload replaced
            or len(self.idle.get(origin, ())) >= IDLE_PER_ORIGIN
            or not self._idle_room()
        ):
            exchange.close()
        else:
            self.idle.setdefault(origin, []).append(exchange)
            self.idle_count += 1

    def _idle_room(self) -> bool:
        """Whether another connection may be kept idle; at the bound, those the servers closed meanwhile are let go
        of first (counted until then: a look at every origin only when the bound is reached, not per poll)."""
        if self.idle_count < IDLE_TOTAL:
            return True
        for origin, kept in list(self.idle.items()):
            kept[:] = [one for one in kept if not one.broken]
            if not kept:
                del self.idle[origin]
        self.idle_count = sum(map(len, self.idle.values()))
        return self.idle_count < IDLE_TOTAL

    def _clamp(self) -> None:
        if self.cutoff is None:
            return
        at = self.loop.time() + (self.cutoff - time.monotonic())
        for call in list(self.calls):
            if call.deadline > at:
                call.deadline, call.cutoff = at, True
                if call.timer is not None:
                    call.timer.cancel()
                call.timer = self.loop.call_at(at, self._expire, call)

    def _new_policy(self) -> None:
        self.generation += 1
        self._forget()

    def _forget(self) -> None:
        for exchanges in self.idle.values():
            for exchange in exchanges:
                exchange.close()
        self.idle.clear()
        self.idle_count = 0

    def _close(self) -> None:
        self.cpu_seconds = time.thread_time()  # the lane thread's CPU over its life (the bench reads it)
        for call in list(self.calls):
            self._expire(call)
        self._forget()
        self.loop.call_soon(self.loop.stop)

    def _idle(self, origin: tuple[str, str, int]) -> Exchange | None:
        """A connection kept for `origin`, clean: not closed, of this address policy, nothing waiting to be read
        on it (bytes a server sent while it was idle — a 408, the rest of an answer — are nobody's answer)."""
        kept = self.idle.get(origin)
        while kept:
            exchange = kept.pop()
            self.idle_count -= 1
            transport = exchange.transport
            if exchange.broken or transport is None or transport.is_closing():
                continue
            if exchange.generation == self.generation and not readable(transport):
                return exchange
            exchange.close()
        return None

    async def _connect(self, outgoing: Outgoing) -> Exchange:
        tls = self.tls if outgoing.scheme == "https" else None
        if tls is None and outgoing.scheme == "https":  # never a plain connection for an https request
            raise Unsent("no TLS context")
        name = outgoing.host if tls is not None else None
        targets = [outgoing.host]
        generation = self.generation
        if self.policy.must_check(outgoing.host):  # resolved once, each address checked, only one passed connected to
            infos = await self.loop.getaddrinfo(outgoing.host, outgoing.port, type=socket.SOCK_STREAM)
            targets = [str(info[4][0]) for info in infos if is_public(str(info[4][0]))]
            if not targets:
                raise Unsent("no public address")
        error: Exception = Unsent("no address")
        for target in targets:
            try:
                _, exchange = await self.loop.create_connection(
                    Exchange, target, outgoing.port, ssl=tls, server_hostname=name
                )
                exchange.generation = generation
                return exchange
            except (OSError, ssl.SSLError) as exc:
                error = exc
        raise error


def settle(release: Callable[[], None], done: Done, answer: Answer | None, error: BaseException | None) -> None:
    """A request's end: its slot given back, then its caller told (whatever the first does)."""
    try:
        release()
    finally:
        done(answer, error)


def readable(transport: asyncio.BaseTransport) -> bool:
    """Whether bytes (or the peer's close) wait on a transport's socket, unread."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return False
    try:
        ready, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)


def quiet_handler(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    """What the lane's loop could not handle (a bug of ours), logged in fixed words: the exception's type only,
    never its text or the objects around it (a request's head carries credentials, an answer a server's text)."""
    error = context.get("exception")
    kind = type(error).__name__ if error is not None else "an error"
    log.error("poll lane: %s in a callback; its exchange is closed and its run takes the session's path", kind)


def tls_context(ca_bundle: str, default: str) -> ssl.SSLContext:
    """The authorities CA_BUNDLE names (a file, or a directory of hashed certificates), or `default`'s (the
    session's: certifi's), as the session trusts them."""
    if ca_bundle and os.path.isdir(ca_bundle):
        context = ssl.create_default_context(capath=ca_bundle)
    else:
        context = ssl.create_default_context(cafile=ca_bundle or default)
    context.set_alpn_protocols(["http/1.1"])
    return context


def new_loop() -> asyncio.AbstractEventLoop:
    """The lane's loop: uvloop's (libuv's), which took ~25% less of the lane's CPU a poll than asyncio's own and
    left the dispatcher's thread more of the interpreter (docs/performance.md); asyncio's where uvloop cannot be
    imported (a platform without its wheel), the same protocol API."""
    try:
        import uvloop
    except ImportError:  # a platform without its wheel (tests/net/test_poll_lane_wire.py runs the lane on both)
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
