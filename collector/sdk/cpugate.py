"""At most two threads at a time in a run's CPU-bound steps (decoding a page, mapping its entries, checking the
items), process-wide.

Under the interpreter lock those steps run one at a time anyway; when a burst of pages arrives, sixty-four
workers contending for the lock make every hand-over costlier and leave the dispatching thread (which starts the
next requests and saves) one turn in sixty-five. Behind the gate the other workers wait on a semaphore instead.
Re-entrant per thread: a step inside another does not take a second place.
"""

from __future__ import annotations

import threading
from types import TracebackType

PLACES = 2


class CpuGate:
    def __init__(self, places: int = PLACES) -> None:
        self.places = threading.BoundedSemaphore(places)
        self.local = threading.local()

    def __enter__(self) -> CpuGate:
        depth = getattr(self.local, "depth", 0)
        if depth == 0:
            self.places.acquire()
        self.local.depth = depth + 1
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.local.depth -= 1
        if self.local.depth == 0:
            self.places.release()


CPU_GATE = CpuGate()
