"""The outbox: finished runs on their way to the database. They are gathered into batches (runs that finish one
by one share the database's round trips), saved (saving.py), kept and retried while the database is away
(`Backlog`), and dropped when their leases lapse or a stop's grace runs out. Each run saved or dropped is
settled: counted in the report, told to the observers, its secrets let go of.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .events import Observers, Report, Saved
from .loglimit import Throttle
from .run import RunResult, forget
from .saving import Saver, Saving
from .store import DatabaseDown

log = logging.getLogger("collector.engine")
SAVE_WINDOW = 0.02  # seconds a finished run may wait for others to be saved with it


class Backlog:
    """Finished runs waiting for the database: saved in batches with what finished since, kept and retried with a
    growing pause (0.5 s doubling to 5 s) while the database is away; `take_all()` gives them up (their leases
    lapsed, or a stop's grace ran out)."""

    def __init__(self, saver: Saver, throttle: Throttle):
        self.saver, self.throttle = saver, throttle
        self.waiting: list[Saving] = []
        self.retries = 0
        self.retry_at = 0.0

    def __len__(self) -> int:
        return len(self.waiting)

    def networks(self) -> list[Mapping[str, Any]]:
        return [s.network for s in self.waiting]

    def retry_in(self) -> float:
        return self.retry_at - time.monotonic()

    def pause(self) -> None:
        """Nothing running, saves waiting for the database: wait a little before the next try."""
        delay = self.retry_in()
        if delay > 0:
            time.sleep(min(delay, 0.25))

    def save(self, results: list[RunResult], users: dict, report: Report) -> list[Saving]:
        """Save these results and what waits (when its retry is due); returns the Savings whose state is written."""
        if not results and (not self.waiting or time.monotonic() < self.retry_at):
            return []
        batch = self.waiting + [Saving(result) for result in results]
        started = time.perf_counter()
        try:
            self.saver.persist(batch, users)
            self.waiting, self.retries = [], 0
        except DatabaseDown as exc:
            self.waiting = [s for s in batch if not s.state_saved]
            report.save_failures += 1
            self.retries += 1
            self.retry_at = time.monotonic() + min(0.5 * 2 ** (self.retries - 1), 5.0) * (self.retries > 1)
            self.throttle.trouble(
                "save",
                "database unavailable while saving (%s): %d finished networks kept, retrying",
                exc,
                len(self.waiting),
                level=logging.ERROR,
            )
        report.db_seconds += time.perf_counter() - started
        return [s for s in batch if s.state_saved]

    def take_all(self) -> list[Saving]:
        taken, self.waiting = self.waiting, []
        return taken


def due_by(values: Mapping[str, Any], now: datetime) -> bool:
    """Whether a saved state schedules its network at or before `now`."""
    at = values.get("scheduledTo")
    return isinstance(at, datetime) and at <= now


class Outbox:
    def __init__(self, saver: Saver, throttle: Throttle, observers: Observers):
        self.backlog = Backlog(saver, throttle)  # finished runs the database has not taken
        self.observers = observers
        self.unsaved: list[RunResult] = []  # finished, gathered for the next save batch
        self.unsaved_since = 0.0
        self.users: dict = {}  # users looked up for the runs held (saving.py), kept while their networks are

    def __len__(self) -> int:
        return len(self.unsaved) + len(self.backlog)

    def kept(self) -> bool:
        """Whether saves the database refused wait for a retry."""
        return bool(self.backlog)

    def networks(self) -> list[Mapping[str, Any]]:
        return [*(r.network for r in self.unsaved), *self.backlog.networks()]

    def wait_in(self, now: float) -> float | None:
        """Seconds until a save is due (a backlog's retry, a batch's window), None when nothing waits."""
        until = [self.backlog.retry_in()] if self.backlog else []
        if self.unsaved:
            until.append(self.unsaved_since + SAVE_WINDOW - now)
        return min(until) if until else None

    def pause(self) -> None:
        """Nothing running, saves waiting for the database: wait a little before the next try."""
        self.backlog.pause()

    def keep_users(self, held: set) -> None:
        """Forget the users looked up for networks no longer held."""
        self.users = {email: data for email, data in self.users.items() if email in held}

    def save(self, results: list[RunResult], batch: int, alone: bool, report: Report, now: datetime) -> bool:
        """Gather finished runs and save them in one batch once `batch` of them wait, the first has waited
        SAVE_WINDOW, or the loop is `alone` (nothing runs any more, or a stop was asked). True when a saved state
        made its network due already (its next run may be claimed now)."""
        if results and not self.unsaved:
            self.unsaved_since = time.monotonic()
        self.unsaved.extend(results)
        if self.unsaved and not (
            len(self.unsaved) >= batch or time.monotonic() - self.unsaved_since >= SAVE_WINDOW or alone
        ):
            return False
        taken, self.unsaved = self.unsaved, []
        due_again = False
        for saving in self.backlog.save(taken, self.users, report):
            self.settle(saving, saving.outcome(), report)
            due_again = due_again or (saving.accepted and due_by(saving.result.update.values, now))
        return due_again

    def expire(self, lapsed: bool, grace_over: bool, running: bool, report: Report) -> None:
        """Saves that waited for the database past their lease, or past a stop's grace once nothing runs, are
        dropped: the networks run again once another pass claims them, and their items are stored once all the
        same."""
        if not self.backlog or not (lapsed or grace_over) or (grace_over and not lapsed and running):
            return
        log.error(
            "dropping %d finished networks whose results could not be saved (%s); they run again "
            "when their leases lapse",
            len(self.backlog),
            "lease lapsed" if lapsed else "stopping",
        )
        for saving in self.backlog.take_all():
            report.dropped += 1
            self.settle(saving, saving.outcome(dropped=True), report)

    def settle(self, saving: Saving, saved: Saved, report: Report) -> None:
        if not saved.dropped:
            report.count(saving.result, saved)
        self.observers.notify("on_run", saving.result, saved)
        forget(saving.network, saving.result.tokens, saving.result.held)
