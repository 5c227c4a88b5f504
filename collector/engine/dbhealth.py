"""Whether MongoDB answers, as this collector sees it: every store operation reports here (Store.observe).

An operation that raised an error meaning "the database cannot be reached" (store.unavailable: no server
selected, a connection refused or reset, a network timeout) marks the database down from the moment that
operation started; any answer — a result, or a refusal of one document — marks it up. The state is read by
/readyz, the `collector_database_up` gauge, systemd's STATUS= line and the log's two transition lines
("unreachable since …", "reachable again after …").

`bound(settings)` is how long MongoDB may stay silent before the collector says it is not ready: a collector
asks the database at least every HEARTBEAT_SECONDS (the heartbeat job, claims), so two of those intervals
without an answer are an outage, not a slow call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from .loglimit import reason_of
from .store import unavailable

if TYPE_CHECKING:  # pragma: no cover
    from ..settings import Settings

log = logging.getLogger("collector.database")


def bound(settings: Settings) -> float:
    """Seconds MongoDB may go unanswered before readiness fails: two heartbeat intervals."""
    return 2 * settings.heartbeat_seconds


class DatabaseHealth:
    """Up or down, since when, and why; thread-safe to read (the metrics server) while the loop writes."""

    def __init__(self, clock: Callable[[], float] = time.time):
        self.clock = clock
        self.lock = threading.Lock()
        self.up = True
        self.last_answer = clock()  # Unix time of the last operation the database answered
        self.down_since: float | None = None  # Unix time the first failing operation of this outage started
        self.reason = ""
        self.listeners: list[Callable[[bool], None]] = []  # told of every change between up and down

    def record(self, operation: str, seconds: float, error: BaseException | None) -> None:
        """A Store.observe sink."""
        now = self.clock()
        was_down: float | None = None
        with self.lock:
            if error is None or not unavailable(error):
                changed, was_down = not self.up, self.down_since or self.last_answer
                self.up, self.last_answer, self.down_since, self.reason = True, now, None, ""
            else:
                changed = self.up
                if self.up:
                    self.up, self.down_since = False, now - seconds
                self.reason = f"{operation}: {reason_of(error)}"
        if changed and self.up:
            log.warning("database reachable again after %.0fs", now - (was_down or now))
        elif changed:
            log.error("database unreachable since %s (%s)", stamp(self.down_since), self.reason)
        if changed:
            for listener in self.listeners:
                listener(self.up)

    def silent_for(self) -> float:
        """Seconds since the database last answered (0 while it is up)."""
        with self.lock:
            return 0.0 if self.up else max(self.clock() - self.last_answer, 0.0)

    def describe(self) -> str:
        """'up', or 'unreachable since HH:MM:SS UTC (reason)'."""
        with self.lock:
            if self.up:
                return "up"
            return f"unreachable since {stamp(self.down_since)} ({self.reason})"


def stamp(unix: float | None) -> str:
    if unix is None:
        return "?"
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
