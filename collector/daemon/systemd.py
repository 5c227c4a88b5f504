"""systemd's notify protocol (Type=notify, WatchdogSec=): READY=1 once MongoDB answered and the indexes exist,
WATCHDOG=1 from the dispatch loop only, each time it goes round (it does at least every HEARTBEAT_SECONDS) —
never from a free-running thread, so a stuck loop is killed and restarted by systemd —, STATUS= with a one-line
summary, STOPPING=1 on the first signal (the process lifecycle, collector/lifecycle.py, sends READY=1 and
STOPPING=1 with its `Notifier`). Without NOTIFY_SOCKET every call is a no-op.

The watchdog asks "is the loop alive", not "is MongoDB up": in a database outage the loop goes on (it retries,
keeps finished runs, gives nothing up) and keeps feeding the watchdog, because a restart does not bring MongoDB
back and a restart loop would hide the one line that says what is wrong. That line is STATUS=: "database
unreachable since …" for as long as the outage lasts (`systemctl status` shows it), with /readyz answering 503
and `collector_database_up` 0.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..engine.events import Observer, Saved
from ..lifecycle import Notifier

if TYPE_CHECKING:  # pragma: no cover
    from ..engine import Report
    from ..engine.dbhealth import DatabaseHealth
    from ..engine.run import RunResult


class Watchdog(Observer):
    """Pets the watchdog on real progress and keeps STATUS= up to date (at most once a second)."""

    def __init__(self, notifier: Notifier, mode: str, database: DatabaseHealth | None = None):
        self.notifier, self.mode, self.database = notifier, mode, database
        self.runs = self.new_items = 0
        self.last = 0.0
        if database is not None:
            database.listeners.append(lambda up: self.progress(force=True))  # an outage shows at once

    def status(self) -> str:
        text = f"STATUS={self.mode}: "
        if self.database is not None and not self.database.up:
            text += f"database {self.database.describe()}; "
        return text + f"{self.runs} runs, {self.new_items} new items"

    def progress(self, force: bool = False) -> None:
        if force or time.monotonic() - self.last >= 1.0:
            self.last = time.monotonic()
            self.notifier.send("WATCHDOG=1", self.status())

    def on_claim(self, mode: str, claimed: int) -> None:
        self.progress()

    def on_run(self, result: RunResult, saved: Saved) -> None:
        self.runs += 1
        self.new_items += saved.new_items
        self.progress()

    def on_idle(self, mode: str) -> None:
        self.progress()

    def on_tick(self, inflight: int) -> None:
        self.progress()

    def on_pass(self, report: Report) -> None:
        self.progress()
