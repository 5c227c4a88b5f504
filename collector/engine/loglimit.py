"""Log lines that repeat while something stays broken (a database outage, a failing job) are rate-limited: at
most one line per key every `every` seconds, saying how many were held back, and a traceback only the first
time a distinct error (its type and place) is seen. So an outage writes a few lines a minute, not hundreds, and
the first traceback of each kind of failure is still there to read.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..sdk.redaction import clip

EVERY = 60.0  # seconds between two lines of one key
KNOWN = 256  # distinct errors remembered (oldest forgotten first)


def reason_of(exc: BaseException) -> str:
    """An error in a short line: its type and the first line of its text, without pymongo's topology dump."""
    text = str(exc).split(", Topology Description:")[0].split(" (configured timeouts:")[0]
    return clip(f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}", 200)


class Throttle:
    def __init__(
        self, every: float = EVERY, clock: Callable[[], float] = time.monotonic, logger: logging.Logger | None = None
    ):
        self.every, self.clock, self.logger = every, clock, logger or logging.getLogger("collector")
        self.last: dict[str, float] = {}
        self.held: dict[str, int] = {}
        self.seen: OrderedDict[tuple, None] = OrderedDict()

    def allow(self, key: str) -> int | None:
        """None: hold this line back. Else the number of lines of `key` held back since the last one."""
        now = self.clock()
        last = self.last.get(key)
        if last is not None and now - last < self.every:
            self.held[key] = self.held.get(key, 0) + 1
            return None
        self.last[key] = now
        return self.held.pop(key, 0)

    def new_error(self, exc: BaseException | None) -> bool:
        """True the first time an error of this type raised at this place is seen (log its traceback then)."""
        if exc is None:
            return False
        frames = traceback.extract_tb(exc.__traceback__)
        where = tuple((f.filename, f.lineno) for f in frames[-3:])
        signature = (type(exc).__qualname__, where)
        if signature in self.seen:
            self.seen.move_to_end(signature)
            return False
        self.seen[signature] = None
        while len(self.seen) > KNOWN:
            self.seen.popitem(last=False)
        return True

    def trouble(self, key: str, message: str, *args: Any, level: int = logging.WARNING) -> None:
        """A failure line that repeats while the trouble lasts: at most one every `every` seconds per `key`,
        errors among the arguments shown as `reason_of` gives them."""
        held = self.allow(key)
        if held is not None:
            shown = [reason_of(a) if isinstance(a, BaseException) else a for a in args]
            self.logger.log(level, message + held_note(held), *shown)

    def forget(self, key: str) -> None:
        """The trouble of `key` is over: its next line is written at once."""
        self.last.pop(key, None)
        self.held.pop(key, None)


def held_note(held: int) -> str:
    return f" ({held} more like it since the last line)" if held else ""
