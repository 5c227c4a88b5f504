"""Saving ahead: a save batch's database work (`Saver.persist`) on a thread of its own, while the dispatcher goes on
starting and finishing runs. The outbox (outbox.py) starts one when a batch is ready and runs are in flight (with
nothing in flight there is nothing to overlap, and it saves on the dispatcher's thread as before); one batch at a
time: what finishes meanwhile gathers for the next. The batch comes back on the dispatcher's completion queue as a
`Persisted`, and the dispatcher settles it on its own thread (the observers, the secrets, the report, a retry kept
when the database was away).

The thread touches only the batch's Savings and a copy of the users looked up; its database operations are
reported to the store's sink from the dispatcher's thread (`Store.deferred`, `Store.replay`). Only with a
thread-safe database client (`Claims.ahead_ok`: pymongo's; mongomock in the process is not thread-safe, and saves
on it stay on the dispatcher's thread).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .saving import Saver, Saving
from .workers import Finished

TICKET = -1  # a save's Finished: no run has this ticket (claims ahead have 0)
OVERDUE = 60.0  # seconds a save's database work may take before the dispatcher says it hangs


@dataclass(frozen=True)
class Persisted:
    """What a save ahead brought back: the batch (each Saving's progress on it), the users it looked up (the
    outbox's cache, grown), its database seconds and the database reports it kept. The Finished's error is the
    persist's exception, when it raised."""

    batch: list[Saving]
    users: dict
    seconds: float
    reports: list = field(default_factory=list)


class SaveAhead:
    def __init__(self, saver: Saver):
        self.saver = saver
        self.tasks: queue.SimpleQueue[tuple | None] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self.since = 0.0  # monotonic time the save out was started

    def start(self, batch: list[Saving], users: dict, done: Callable[[Finished], object]) -> None:
        """Save `batch` on the thread, looking users up in `users` (the thread's own copy); the answer comes to
        `done` (the completion queue of the loop that started it, not of one begun since)."""
        self.since = time.monotonic()
        if self.thread is None or not self.thread.is_alive():
            self.tasks = queue.SimpleQueue()  # a thread's own: a closed one's end-mark is never another's
            self.thread = threading.Thread(target=self._work, args=(self.tasks,), name="save-ahead", daemon=True)
            self.thread.start()
        self.tasks.put((batch, users, done))

    def overdue(self) -> float:
        """Seconds the save out has been out past OVERDUE (the outbox asks only while one is out)."""
        return max(time.monotonic() - self.since - OVERDUE, 0.0)

    def _work(self, tasks: queue.SimpleQueue[tuple | None]) -> None:
        while True:
            task = tasks.get()
            if task is None:
                return
            batch, users, done = task
            error: BaseException | None = None
            started = time.perf_counter()
            with self.saver.store.deferred() as reports:
                try:
                    self.saver.persist(batch, users, share=False)  # the quota memory is the dispatcher's
                except Exception as exc:  # the dispatcher handles it as it would its own save's
                    error = exc
            persisted = Persisted(batch, users, time.perf_counter() - started, reports)
            done(Finished(TICKET, persisted, error))

    def close(self) -> None:
        if self.thread is not None:
            self.tasks.put(None)
            self.thread.join(timeout=1)  # (one blocked in the database is left to end with the process)
            self.thread = None
