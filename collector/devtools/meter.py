"""The bench's observer: counts a workload's runs, the pages they found and the first errors, and stops the loop at
a target (bench.py in one process; scaleout.py's `SharedMeter` across processes)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..engine.events import Observer, Saved
from ..engine.run import RunResult


def reached_normal(result: RunResult) -> bool:
    """A run that ended its network's history walk."""
    return result.update.values.get("mode") == "normal"


class Meter(Observer):
    """Counts runs (or those `counts` picks, such as runs that reached normal mode) and stops the loop at a target."""

    def __init__(self, target: int, counts: Callable[[RunResult], bool] = lambda result: True):
        self.target, self.counts, self.runs, self.done = target, counts, 0, threading.Event()
        self.pages = 0
        self.errors: list[str] = []  # runs that failed: a bench measures working runs, or says why not

    def on_run(self, result: RunResult, saved: Saved) -> None:
        self.pages += bool(result.items)
        if result.error is not None and len(self.errors) < 5:
            self.errors.append(f"{result.status}: {result.error.message[:120]}")
        if self.counts(result):
            self.count()

    def count(self) -> None:
        self.runs += 1
        if self.runs >= self.target:
            self.done.set()
