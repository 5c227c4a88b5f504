"""The policy of the one small HTTP server core (core.py, under the metrics/health port, daemon/httpserver.py, and
the monitor, monitor/httpd.py): how many connections are held and whom a newcomer displaces, one deadline per
connection, the head's limits (head.py), and one byte budget for what every client has not read yet. Pure: the
core moves the bytes, this decides.

- **Room**: at most `limit` connections. A newcomer always gets in: at the bound the oldest idle connection is
  closed (one that has not sent a whole request head: it says nothing, or trickles), else the oldest event stream
  (a page only waiting for the next event; its browser reconnects), else the oldest of all (an exchange takes
  milliseconds, so the oldest one is stalled). A request being answered is never chosen while an idle one is left.
- **Budget**: the bytes written for clients and not yet taken by their sockets, summed over every client. One
  client holds at most `per_client` (then it is cut); past `total` the clients holding the most are cut first (the
  slowest readers), until the rest fits.
- **CutShort**: the connections closed before their exchange ended, by reason, summed up in one log line a
  minute at most.
"""

from __future__ import annotations

import collections
import ctypes
import logging
import math
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Mapping
from typing import Generic, TypeVar

from .head import HEAD_LIMIT

__all__ = [
    "DEADLINE",
    "HEAD_LIMIT",
    "IDLE",
    "SEND_BUFFER",
    "STREAM",
    "WORKING",
    "Budget",
    "CutShort",
    "Room",
    "give_back_freed",
]

DEADLINE = 10.0  # seconds a connection has for its request (head and body) to arrive, and again for its answer
SEND_BUFFER = 64 * 1024  # the kernel's buffer per connection (it doubles it), not autotuned up to megabytes
REPORT_EVERY = 60.0  # connections cut short are summed up in one log line at most this often

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD = 128 * 1024  # glibc's default, kept fixed

IDLE = "idle"  # no whole request head yet
WORKING = "working"  # a request being answered
STREAM = "stream"  # an event stream between two events

K = TypeVar("K", bound=Hashable)


class Room(Generic[K]):
    """The connections held, oldest first, each with its state; who makes room for a newcomer."""

    def __init__(self, limit: int):
        self.limit = max(1, limit)
        self.held: OrderedDict[K, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self.held)

    def __contains__(self, key: object) -> bool:
        return key in self.held

    def __iter__(self) -> Iterator[K]:
        """Oldest first (iterate over a list of it to close some on the way)."""
        return iter(self.held)

    def add(self, key: K) -> None:
        self.held[key] = IDLE

    def mark(self, key: K, state: str) -> None:
        if key in self.held:
            self.held[key] = state

    def state(self, key: K) -> str | None:
        return self.held.get(key)

    def remove(self, key: K) -> None:
        self.held.pop(key, None)

    def count(self, state: str) -> int:
        return sum(1 for s in self.held.values() if s == state)

    def oldest(self, state: str | None = None) -> K | None:
        return next((k for k, s in self.held.items() if state is None or s == state), None)

    def victim(self) -> K | None:
        """Who is closed for a newcomer when the room is full (None while there is room)."""
        if len(self.held) < self.limit:
            return None
        for state in (IDLE, STREAM):
            if (key := self.oldest(state)) is not None:
                return key
        return self.oldest()


class Budget:
    """The bytes held for clients that have not read them: `total` for all together, `per_client` for one."""

    def __init__(self, total: int, per_client: int | None = None):
        self.total, self.per_client = total, per_client

    def over_client(self, held: int) -> bool:
        return self.per_client is not None and held > self.per_client

    def to_cut(self, held: Mapping[K, int], extra: int = 0) -> list[K]:
        """Who is cut so that the others, and `extra` bytes about to be written, fit in the total: the clients
        holding the most first (oldest first among equals), never one holding nothing."""
        over = sum(held.values()) + extra - self.total
        cut: list[K] = []
        for key, size in sorted(held.items(), key=lambda item: -item[1]):
            if over <= 0 or size <= 0:
                break
            cut.append(key)
            over -= size
        return cut


class CutShort:
    """Connections closed before their exchange ended, by reason: counted since the start, and summed up in one
    warning of `log` at most every REPORT_EVERY seconds (none for a quiet port). `words` says each reason, after
    its count (or where a text has `{n}`)."""

    def __init__(self, name: str, words: Mapping[str, str], log: logging.Logger):
        self.name, self.words, self.log = name, words, log
        self.closed: collections.Counter[str] = collections.Counter()  # since the start
        self.unreported: collections.Counter[str] = collections.Counter()
        self.reported_at = -math.inf

    def count(self, reason: str) -> int:
        """A connection cut short for `reason`: how many for that reason since the last summary line."""
        self.closed[reason] += 1
        self.unreported[reason] += 1
        return self.unreported[reason]

    def due(self) -> float | None:
        """When the next summary line is due (monotonic time), or None while there is nothing to say."""
        return self.reported_at + REPORT_EVERY if self.unreported else None

    def report(self, now: float) -> None:
        """One line for the connections cut short since the last one, if one is due by `now`."""
        if not self.unreported or now - self.reported_at < REPORT_EVERY:
            return
        counts = self.unreported
        parts = [
            text.format(n=counts[reason]) if "{n}" in text else f"{counts[reason]} {text}"
            for reason, text in self.words.items()
            if counts[reason]
        ]
        self.log.warning("%s: connections cut short: %s", self.name, "; ".join(parts))
        self.unreported = collections.Counter()
        self.reported_at = now


def give_back_freed() -> bool:
    """Have the C allocator (glibc) give every block over MMAP_THRESHOLD pages of its own, returned to the system
    when freed, instead of raising that threshold as large blocks come and go (its default). Otherwise the buffers
    of clients cut for reading too slowly stay in the process as a fragmented heap: measured on the monitor, 142 MiB
    resident after 240 clients that never read a 640 KiB answer were cut, 63 MiB with this. False where the
    allocator has no such setting (nothing changes there)."""
    try:
        return bool(ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError):
        return False
