"""The whole-request deadline: `HTTP_TIMEOUT` bounds connecting, the status line and headers, and the body, however
slowly a server trickles them. One watch thread per process shuts down the socket of a request that passes its
deadline (socket timeouts alone only bound each read). A GET's reads carry no socket timeout of their own, nor does
its request sent on a kept-alive connection: the watch is their bound (a timeout costs a poll() before every read
and write, and switching it two ioctl() calls per request, each a hand-over of the interpreter lock); connecting
keeps HTTP_TIMEOUT as its timeout, since the watch takes a socket once it is connected (connections.py).

A stopping collector (or sink service) brings the deadline of its running requests forward to its cutoff
(`Watch.clamp`); an entry tells whether it was cut there (`cutoff`) or at its own deadline, and each room names the
two as its errors (the collectors' SDK: `Interrupted` and `Transient`).
"""

from __future__ import annotations

import heapq
import itertools
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .addresses import Policy
from .errors import Stopping


@dataclass(eq=False)
class Entry:
    """One request under watch: its deadline (monotonic seconds) and the connections it uses."""

    owner: Any
    deadline: float
    cutoff: bool  # the deadline is the owner's stop cutoff, not the request's own
    policy: Policy
    conns: list = field(default_factory=list)
    done: bool = False
    fired: bool = False


class Watch:
    """Shuts down the sockets of requests that pass their deadline. One daemon thread, started on first use."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # RLock: a signal handler on the main thread may call clamp()
        self.wake = threading.Condition(self.lock)
        self.heap: list[tuple[float, int, Entry]] = []
        self.active: set[Entry] = set()
        self.local = threading.local()
        self.seq = itertools.count()
        self.thread: threading.Thread | None = None

    def begin(self, owner: Any, deadline: float, cutoff: bool, policy: Policy) -> Entry:
        entry = Entry(owner, deadline, cutoff, policy)
        self.local.entry = entry
        with self.lock:
            self.active.add(entry)
            self._push(entry)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="http-deadlines", daemon=True)
                self.thread.start()
        return entry

    def end(self, entry: Entry) -> None:
        self.local.entry = None
        with self.lock:
            entry.done = True
            entry.conns = []  # a finished entry may wait in the heap a while: it holds no connection meanwhile
            self.active.discard(entry)
            if len(self.heap) > 1024 and len(self.heap) > 4 * len(self.active):
                self.heap = [item for item in self.heap if not item[2].done]
                heapq.heapify(self.heap)

    def current(self) -> Entry | None:
        return getattr(self.local, "entry", None)

    def attach(self, conn: Any, sock: socket.socket | None) -> None:
        """Put a connection (and its socket) under the current request's deadline."""
        entry = self.current()
        if entry is None or sock is None:
            return
        with self.lock:
            conn._collector_entry = entry  # a pooled connection belongs to the request that uses it now
            entry.conns.append((conn, sock))
            if entry.fired:
                shutdown(conn, sock)

    def clamp(self, owner: Any, deadline: float) -> None:
        """Bring the deadline of every running request of `owner` forward to `deadline`."""
        with self.lock:
            for entry in list(self.active):
                if entry.owner is owner and deadline < entry.deadline:
                    entry.deadline, entry.cutoff = deadline, True
                    self._push(entry)

    def _push(self, entry: Entry) -> None:
        heapq.heappush(self.heap, (entry.deadline, next(self.seq), entry))
        if self.heap[0][2] is entry:  # only an earlier deadline than the one the watch sleeps towards wakes it
            self.wake.notify()

    def _run(self) -> None:
        with self.lock:
            while True:
                while self.heap and (self.heap[0][2].done or self.heap[0][2].fired):
                    heapq.heappop(self.heap)
                if not self.heap:
                    self.wake.wait()
                    continue
                deadline, _, entry = self.heap[0]
                delay = deadline - time.monotonic()
                if delay > 0:
                    self.wake.wait(delay)
                    continue
                heapq.heappop(self.heap)
                if deadline > entry.deadline:
                    continue  # an older, later deadline of a clamped entry
                entry.fired = True
                for conn, sock in entry.conns:
                    if getattr(conn, "_collector_entry", None) is entry:
                        shutdown(conn, sock)


def shutdown(conn: Any, sock: socket.socket) -> None:
    target = getattr(conn, "sock", None) or sock
    try:
        socket.socket.shutdown(target, socket.SHUT_RDWR)  # the plain socket's: safe under a TLS reader
    except (OSError, TypeError, ValueError):
        pass


WATCH = Watch()


def begin(owner: Any, timeout: float, stop: float | None, policy: Policy, what: str) -> Entry:
    """Put the calling thread's next request under watch: due `timeout` seconds from now, or at the owner's stop
    cutoff (`stop`, monotonic) when that comes first; `Stopping` when the cutoff has passed."""
    now = time.monotonic()
    deadline, cutoff = now + timeout, False
    if stop is not None:
        if now >= stop:
            raise Stopping(f"collector stopping: {what} not started")
        if stop < deadline:
            deadline, cutoff = stop, True
    return WATCH.begin(owner, deadline, cutoff, policy)
