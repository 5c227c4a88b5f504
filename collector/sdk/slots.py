"""Request slots: how many HTTP exchanges one collector has out at once, in all (`CONCURRENCY`) and per service
(`SERVICE_CONCURRENCY_<SERVICE>`).

A slot is held from sending a request until its body is read (still encoded), not for a whole run: a run that
turns its answer into items (decoding, JSON, mapping, the save) has given its slot to the next network's request,
so the API is asked as often as the concurrency allows while the interpreter does that work. The engine holds more
runs than slots (engine/sizing.py: `seats`); a run whose request finds every slot taken waits here for one.

The turn: one run at a time turns a large answer into items (http.py decides what is large). It takes the turn
before decoding and keeps it until its next request or its end (`take_turn`, `give_turn`, `serving`). The runs
with pages then wait for the turn on a lock rather than for the interpreter all at once, so a request whose answer
is being read competes with one thread turning answers into items, not with every run that has one: each read
gets the interpreter back within a switch interval (engine/collector.py sets it to 1 ms).

A run's thread says which service it serves (`serving`, kept per thread whichever `Slots` the engine has); a
thread that said nothing (a tool calling a connector by hand) takes a slot of the whole only. A wait is bounded by
the exchanges ahead of it, each bounded by its own deadline; once the collector is stopping (`take(until=...)`
gives its cutoff), a request that would wait for a slot is not sent at all: the stop waits for the exchanges
already out, not for a round of new ones.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

WAIT_STEP = 0.25  # seconds between looks at the stop's cutoff while waiting for a slot
_SERVING = threading.local()  # the service of this thread's run, for every Slots (a reload makes new ones)
_TURN = threading.Lock()  # the turn to turn an answer into items: one run at a time (module docstring)
# Seconds a run waits for the turn before it goes on without it: a burst's pages wait well under a second for theirs
# (64 pages of ~4 ms); a run stuck with the turn (a connector's endless loop) must not stop every other run.
TURN_WAIT = 10.0


@contextmanager
def serving(service: object) -> Iterator[None]:
    """This thread runs a network of `service` until the block ends: its requests count against the service's
    cap, whichever Slots they take (slots a reload makes while the run goes on included), and its answers take
    the turn (`take_turn`), given back at the latest when the block ends."""
    _SERVING.service = service if isinstance(service, str) else None
    _SERVING.run = True
    try:
        yield
    finally:
        _SERVING.service = None
        _SERVING.run = False
        give_turn()


def take_turn() -> None:
    """A run's request has its answer: wait for the turn (one run at a time turns answers into items) and keep
    it until the run's next request or its end; after TURN_WAIT, go on without it. Outside a run (`serving`),
    nothing."""
    if getattr(_SERVING, "run", False) and not getattr(_SERVING, "turn", False):
        _SERVING.turn = _TURN.acquire(timeout=TURN_WAIT)


def give_turn() -> None:
    """This thread's run is about to ask again, or is done: the turn goes to the next run with an answer."""
    if getattr(_SERVING, "turn", False):
        _SERVING.turn = False
        _TURN.release()


class Tokens:
    """`size` slots as tokens in a queue (the standard library's C `SimpleQueue`): taking one and giving it back
    are one call each, where a `threading.Semaphore` runs a Python-level condition (a lock, a wait list) on both."""

    def __init__(self, size: int):
        self.queue: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(size):
            self.queue.put(None)

    def acquire(self, timeout: float | None = None) -> bool:
        """One slot: at once when `timeout` is None (False if none is free), else within `timeout` seconds."""
        try:
            if timeout is None:
                self.queue.get_nowait()
            else:
                self.queue.get(timeout=timeout)
        except queue.Empty:
            return False
        return True

    def release(self) -> None:
        self.queue.put(None)

    def free(self) -> bool:
        """Whether a slot looks free now (a hint: another thread may take or give one back the next moment)."""
        return not self.queue.empty()


class Held:
    """The slots one exchange holds; `release()` gives them back (once)."""

    def __init__(self, tokens: tuple[Tokens, ...]):
        self.tokens = tokens

    def release(self) -> None:
        tokens, self.tokens = self.tokens, ()
        for slot in reversed(tokens):
            slot.release()


class Slots:
    def __init__(self, total: int, cap: Callable[[str], int]):
        self.size = max(total, 1)
        self.total = Tokens(self.size)
        self.cap = cap
        self.per_service: dict[str, Tokens] = {}
        self.lock = threading.Lock()

    def take(self, until: Callable[[], float | None]) -> Held | None:
        """Wait for a slot of this thread's service, then one of the whole (always in that order: a run waiting
        for its service's slot holds none of the whole). None when the collector is stopping (`until()`, the
        stop's monotonic cutoff, is not None) and a slot is not free at once."""
        service = self.service_slots()
        if service is None:
            if self.total.acquire() or self._wait(self.total, until):
                return Held((self.total,))
            return None
        if not (service.acquire() or self._wait(service, until)):
            return None
        if self.total.acquire() or self._wait(self.total, until):
            return Held((service, self.total))
        service.release()
        return None

    def try_take(self, service: object) -> Held | None:
        """A slot of `service` and one of the whole if both are free now (a poll the engine sends on its event
        loop, engine/dispatch.py: it does not wait for one; without, the run takes a worker and waits there)."""
        slots = self._of(service) if isinstance(service, str) else None
        if slots is not None and not slots.acquire():
            return None
        if self.total.acquire():
            return Held((slots, self.total) if slots is not None else (self.total,))
        if slots is not None:
            slots.release()
        return None

    def free(self, service: object) -> bool:
        """Whether `try_take(service)` looks likely to find its slots free now, without taking any: a look, not a
        promise (the dispatcher skips preparing a poll that could not go out)."""
        if not self.total.free():
            return False
        return not isinstance(service, str) or self._of(service).free()

    def service_slots(self) -> Tokens | None:
        service = getattr(_SERVING, "service", None)
        if service is None:
            return None
        return self._of(service)

    def _of(self, service: str) -> Tokens:
        slots = self.per_service.get(service)
        if slots is None:
            with self.lock:
                slots = self.per_service.setdefault(service, Tokens(max(self.cap(service), 1)))
        return slots

    @staticmethod
    def _wait(slots: Tokens, until: Callable[[], float | None]) -> bool:
        """After a look that found no slot free: wait for one, looking at the stop every WAIT_STEP."""
        while True:
            if until() is not None:  # stopping: nothing new waits its turn
                return False
            if slots.acquire(timeout=WAIT_STEP):
                if until() is None:
                    return True
                slots.release()  # the stop came while it waited: the slot goes back unused
                return False
