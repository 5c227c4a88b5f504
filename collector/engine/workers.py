"""The threads that run networks: the dispatcher hands a run in, and each finished run comes back on the queue the
dispatcher waits on, as a `Finished` (its ticket, and the result or the exception).

Why not `concurrent.futures.ThreadPoolExecutor`: every task there makes a Future (a condition variable and its
lock), takes the executor's lock and its idle semaphore (a condition in Python) to be submitted, and the future's
condition again to set its result and run its callback. Measured on the 2-core development machine with runs that
do nothing, 64 in flight, it costs 12.7–13.7 µs of CPU per run; two of the standard library's C queues cost
1.0–1.1 µs (`collector bench` polls cost ~700 µs each, so ~2% of a poll). Threads are made as runs need them, up
to `size`, and kept (as the executor does).
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

TICKETS = itertools.count(1)  # the runs' tickets, every pool's (the lane's are negative: engine/polls.py)


class Finished(NamedTuple):
    """One task's end: its ticket (from `submit`), and what it returned, or what it raised."""

    ticket: int
    result: Any
    error: BaseException | None

    def value(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


class Workers:
    def __init__(self, size: int, name: str = "network"):
        self.size = max(size, 1)
        self.name = name
        self.tasks: queue.SimpleQueue[tuple | None] = queue.SimpleQueue()
        self.threads: list[threading.Thread] = []
        self.idle = 0  # threads waiting for a task (or about to): a new task goes to one of them
        self.lock = threading.Lock()
        self.tickets = TICKETS  # shared by every pool: a reload's new pool never reuses a ticket held in flight
        self.closed = False

    def submit(self, call: Callable[..., Any], args: tuple, done: Callable[[Finished], object]) -> int:
        """Run `call(*args)` on a worker thread; `done(Finished)` is called there once it ends. Its ticket."""
        if self.closed:
            raise RuntimeError("workers shut down: no new task")
        ticket = next(self.tickets)
        self.tasks.put((ticket, call, args, done))
        with self.lock:
            if self.idle:
                self.idle -= 1
            elif len(self.threads) < self.size:
                thread = threading.Thread(target=self._work, name=f"{self.name}_{len(self.threads)}", daemon=True)
                self.threads.append(thread)
                thread.start()
        return ticket

    def _work(self) -> None:
        while True:
            task = self.tasks.get()
            if task is None:
                return
            ticket, call, args, done = task
            del task
            try:
                finished = Finished(ticket, call(*args), None)
            except BaseException as exc:  # handed to the dispatcher, which decides (as a Future would hold it)
                finished = Finished(ticket, None, exc)
            del call, args
            with self.lock:  # idle before the dispatcher hears: the task it starts next finds this thread
                self.idle += 1
            done(finished)
            del finished

    def shutdown(self, wait: bool = True) -> None:
        """No new task; the threads end once the tasks already given are done (waited for when `wait`)."""
        self.closed = True
        with self.lock:
            threads = list(self.threads)
        for _ in threads:
            self.tasks.put(None)
        if wait:
            for thread in threads:
                thread.join()


def drain(completions: queue.SimpleQueue[Finished], timeout: float, gather: float = 0.0) -> list[Finished]:
    """The runs that finished: waits up to `timeout` for the first, then `gather` seconds more, then takes every
    other one that finished meanwhile (one wake-up for a burst; no lock taken per run in flight, as
    `concurrent.futures.wait` does)."""
    try:
        done = [completions.get(timeout=timeout) if timeout > 0 else completions.get_nowait()]
    except queue.Empty:
        return []
    if gather > 0:
        time.sleep(gather)
    while True:
        try:
            done.append(completions.get_nowait())
        except queue.Empty:
            return done
