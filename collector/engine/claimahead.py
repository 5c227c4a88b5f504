"""Claiming ahead: the claim's database work (`Claims.lease`) on a thread of its own, while the dispatcher goes on
starting, finishing and saving runs. The dispatcher starts one when it wants more networks and runs are in flight
(with nothing in flight there is nothing to overlap, and it claims on its own thread as before); the leased
documents come back on the dispatcher's completion queue as a `Leased`, and the dispatcher takes them in on its own
thread (`Claims.admitted`: the observers, the secrets, the quota facts) — or gives them back, if a stop came
meanwhile. The lease rules are the claim's own: the same query, the same fenced update, the same lease length.

The thread's database operations are reported to the store's sink from the dispatcher's thread (`Store.deferred`,
`Store.replay`): the health and the metrics hear from one thread only. Only with a thread-safe database client
(`Claims.ahead_ok`: pymongo's; mongomock in the process is not thread-safe, and claims on it stay on the
dispatcher's thread).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from .claims import Claims
from .workers import Finished

TICKET = 0  # a claim's Finished: no run has this ticket
OVERDUE = 60.0  # seconds a claim's database work may take before the dispatcher says it hangs


@dataclass(frozen=True)
class Leased:
    """What a claim ahead brought back: the mode and time it claimed for, the documents leased (none when it
    failed: the Finished's error says why), and the database reports it kept."""

    mode: str
    now: datetime
    documents: list[dict]
    reports: list = field(default_factory=list)


class ClaimAhead:
    def __init__(self, claims: Claims, done: Callable[[Finished], object]):
        self.claims, self.done = claims, done
        self.tasks: queue.SimpleQueue[tuple | None] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self.busy = False  # a claim is out: its answer is still to come (one at a time)
        self.since = 0.0  # monotonic time the claim out was started

    def start(self, mode: str, limit: int, now: datetime, skip_services: Iterable[str]) -> None:
        """Claim up to `limit` networks of `mode` on the thread; the answer comes to `done`."""
        self.busy, self.since = True, time.monotonic()
        if self.thread is None or not self.thread.is_alive():
            self.tasks = queue.SimpleQueue()  # a thread's own: a closed one's end-mark is never another's
            self.thread = threading.Thread(target=self._work, args=(self.tasks,), name="claim-ahead", daemon=True)
            self.thread.start()
        self.tasks.put((mode, limit, now, frozenset(skip_services)))

    def overdue(self) -> float:
        """Seconds the claim out has been out past OVERDUE (0: none out, or not overdue). The dispatcher stops
        telling the watchdog it goes round meanwhile: a database that hangs a claim gets the daemon restarted, as
        it did when the dispatcher itself waited for the claim."""
        return max(time.monotonic() - self.since - OVERDUE, 0.0) if self.busy else 0.0

    def taken(self) -> None:
        """The dispatcher took the answer in."""
        self.busy = False

    def _work(self, tasks: queue.SimpleQueue[tuple | None]) -> None:
        while True:
            task = tasks.get()
            if task is None:
                return
            mode, limit, now, skip = task
            documents: list[dict] = []
            error: BaseException | None = None
            with self.claims.store.deferred() as reports:
                try:
                    documents = self.claims.lease(mode, limit, now, skip)
                except Exception as exc:  # the database is away: the dispatcher tries again later
                    error = exc
            self.done(Finished(TICKET, Leased(mode, now, documents, reports), error))

    def close(self) -> None:
        if self.thread is not None:
            self.tasks.put(None)
            self.thread.join(timeout=1)  # (one blocked in the database is left to end with the process)
            self.thread = None
