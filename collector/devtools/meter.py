"""The bench's observer: counts a workload's runs, the pages they found and the first errors, and stops the loop at
a target (bench.py in one process; scaleout.py's `SharedMeter` across processes)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..engine.events import Observer, Saved
from ..engine.run import RunResult


def reached_normal(result: RunResult) -> bool:
    """A run that ended its network's history walk."""
    return result.update.values.get("mode") == "normal"


class Meter(Observer):
    """Counts runs (or those `counts` picks, such as runs that reached normal mode) and stops the loop at a target.
    With `warm`, it also times the steady part of the workload: from the `warm`-th run counted to the target, so
    neither the start (the first claim, the first wait for answers) nor the stop (the last answers and saves) is
    in it (`steady()`)."""

    def __init__(self, target: int, counts: Callable[[RunResult], bool] = lambda result: True, warm: int = 0):
        self.target, self.counts, self.runs, self.done = target, counts, 0, threading.Event()
        self.pages = 0
        self.errors: list[str] = []  # runs that failed: a bench measures working runs, or says why not
        self.warm = warm
        self.marks: list[tuple[float, float, int]] = []  # (wall, process CPU, runs) at `warm` and at the target

    def on_run(self, result: RunResult, saved: Saved) -> None:
        self.pages += bool(result.items)
        if result.error is not None and len(self.errors) < 5:
            self.errors.append(f"{result.status}: {result.error.message[:120]}")
        if self.counts(result):
            self.count()

    def count(self) -> None:
        self.runs += 1
        if self.warm and self.runs == self.warm:
            self.marks.append((time.perf_counter(), time.process_time(), self.runs))
        if self.warm and self.runs == self.target:
            self.marks.append((time.perf_counter(), time.process_time(), self.runs))
        if self.runs >= self.target:
            self.done.set()

    def steady(self) -> dict[str, float]:
        """The steady part's wall time, process CPU and runs (`warm` given, the target reached)."""
        if len(self.marks) != 2:
            raise RuntimeError("the meter's steady part was not timed: no warm mark, or the target not reached")
        (wall0, cpu0, runs0), (wall1, cpu1, runs1) = self.marks
        if runs1 <= runs0:
            raise RuntimeError(f"a target of {self.target} runs leaves no steady part after the {self.warm}th")
        return {"steady_wall_s": wall1 - wall0, "steady_cpu_s": cpu1 - cpu0, "steady_polls": runs1 - runs0}
