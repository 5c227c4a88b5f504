"""Request slots: how many HTTP exchanges one collector has out at once, in all (`CONCURRENCY`) and per service
(`SERVICE_CONCURRENCY_<SERVICE>`).

A slot is held from sending a request until its body is read and decoded, not for a whole run: a run that turns
its answer into items (JSON, mapping, the save) has given its slot to the next network's request, so the API is
asked as often as the concurrency allows while the interpreter does that work. The engine holds more runs than
slots (engine/sizing.py: `seats`); a run whose request finds every slot taken waits here for one.

A run's thread says which service it serves (`serving`, kept per thread whichever `Slots` the engine has); a
thread that said nothing (a tool calling a connector by hand) takes a slot of the whole only. A wait is bounded by
the exchanges ahead of it, each bounded by its own deadline; once the collector is stopping (`take(until=...)`
gives its cutoff), a request that would wait for a slot is not sent at all: the stop waits for the exchanges
already out, not for a round of new ones.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

WAIT_STEP = 0.25  # seconds between looks at the stop's cutoff while waiting for a slot
_SERVING = threading.local()  # the service of this thread's run, for every Slots (a reload makes new ones)


@contextmanager
def serving(service: object) -> Iterator[None]:
    """This thread's requests count against `service`'s cap until the block ends, whichever Slots they take (slots
    a reload makes while the run goes on included)."""
    _SERVING.service = service if isinstance(service, str) else None
    try:
        yield
    finally:
        _SERVING.service = None


class Held:
    """The slots one exchange holds; `release()` gives them back (once)."""

    def __init__(self, semaphores: tuple[threading.Semaphore, ...]):
        self.semaphores = semaphores

    def release(self) -> None:
        semaphores, self.semaphores = self.semaphores, ()
        for semaphore in reversed(semaphores):
            semaphore.release()


class Slots:
    def __init__(self, total: int, cap: Callable[[str], int]):
        self.size = max(total, 1)
        self.total = threading.BoundedSemaphore(self.size)
        self.cap = cap
        self.per_service: dict[str, threading.BoundedSemaphore] = {}
        self.lock = threading.Lock()

    def take(self, until: Callable[[], float | None]) -> Held | None:
        """Wait for a slot of this thread's service, then one of the whole (always in that order: a run waiting
        for its service's slot holds none of the whole). None when the collector is stopping (`until()`, the
        stop's monotonic cutoff, is not None) and a slot is not free at once."""
        held: list[threading.Semaphore] = []
        for semaphore in (self.service_slots(), self.total):
            if semaphore is None:
                continue
            if not self._wait(semaphore, until):
                Held(tuple(held)).release()
                return None
            held.append(semaphore)
        return Held(tuple(held))

    def service_slots(self) -> threading.BoundedSemaphore | None:
        service = getattr(_SERVING, "service", None)
        if service is None:
            return None
        semaphore = self.per_service.get(service)
        if semaphore is None:
            with self.lock:
                semaphore = self.per_service.setdefault(service, threading.BoundedSemaphore(max(self.cap(service), 1)))
        return semaphore

    @staticmethod
    def _wait(semaphore: threading.Semaphore, until: Callable[[], float | None]) -> bool:
        while True:
            if semaphore.acquire(blocking=False):
                return True
            if until() is not None:  # stopping: nothing new waits its turn
                return False
            if semaphore.acquire(timeout=WAIT_STEP):
                if until() is None:
                    return True
                semaphore.release()  # the stop came while it waited: the slot goes back unused
                return False
