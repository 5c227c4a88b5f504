"""Event records and the observer protocol — a leaf module: the engine emits, listeners (the run log lines,
metrics, the systemd watchdog, heartbeats, the recurring jobs) listen, and both import only this.

`Report` says what one pass (or one minute of the continuous loop) did, `Saved` how the save of one run went.
Observers are cross-cutting reactions called on the dispatch loop's thread; like dramatiq's middleware, every
hook has a no-op default, and an observer that raises is logged and never breaks the work.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..settings import Settings
    from .run import RunResult

log = logging.getLogger("collector.observers")


@dataclass(frozen=True)
class Saved:
    """How the save of one run went: new items stored, and whether the state write was accepted."""

    new_items: int
    state_saved: bool  # False: the lease was lost to another collector (items were kept)
    dropped: bool = False  # never saved: the database stayed away until the lease lapsed


@dataclass
class Report:
    """What one pass did. `runs` counts the runs saved (or settled without running); `tasks` is its old name."""

    mode: str
    runs: int = 0
    new_items: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    requests_skipped: int = 0  # networks moved to their quota reset without an API call
    stale: int = 0  # state writes refused because the lease was lost
    save_failures: int = 0
    released: int = 0  # leases given back unrun (shutdown)
    dropped: int = 0  # finished runs whose results could not be saved before their leases lapsed
    skipped: int = 0  # entries not kept (unreadable, or refused by the database)
    db_seconds: float = 0.0  # time spent saving items and state
    duration: float = 0.0

    @property
    def tasks(self) -> int:
        return self.runs

    def count(self, result: RunResult, saved: Saved) -> None:
        self.runs += 1
        self.new_items += saved.new_items
        self.skipped += result.skipped
        status = str(result.status)
        self.by_status[status] = self.by_status.get(status, 0) + 1
        if status == "rateLimit" and not result.called:
            self.requests_skipped += 1
        if not saved.state_saved:
            self.stale += 1


class Observer:
    """Subclass and override what you need; every hook is called on the engine's thread."""

    def on_claim(self, mode: str, claimed: int) -> None:
        """A pass leased `claimed` networks."""

    def on_run(self, result: RunResult, saved: Saved) -> None:
        """One run finished and its save is done (or it was dropped)."""

    def on_pass(self, report: Report) -> None:
        """A pass ended."""

    def on_idle(self, mode: str) -> None:
        """The loop woke up and found nothing due."""

    def on_tick(self, inflight: int) -> None:
        """The loop went round (at least every HEARTBEAT_SECONDS, whatever it is doing)."""

    def on_leases(self, held: int) -> None:
        """After each round: networks this collector holds leases on (queued, in flight or unsaved)."""

    def on_lag(self, mode: str, seconds: float) -> None:
        """A claim found its most overdue network this late (0 when nothing was due)."""

    def on_database(self, operation: str, seconds: float, error: BaseException | None) -> None:
        """A database operation ended: how long it took and the error it raised (None: it answered)."""

    def on_pauses(self, mode: str, pauses: list) -> None:
        """The operator's pauses in force for this collector's mode, as last read (engine/store/control.py)."""

    def on_settings(self, old: Settings, new: Settings) -> None:
        """A reload applied new settings to the engine: follow the ones this observer depends on."""


class Observers:
    def __init__(self, observers: Iterable[Observer] = ()):
        self.observers: list[Observer] = list(observers)

    def add(self, observer: Observer) -> None:
        self.observers.append(observer)

    def notify(self, hook: str, *args: Any) -> None:
        for observer in self.observers:
            try:
                getattr(observer, hook)(*args)
            except Exception:  # an observer never breaks the work
                log.exception("observer %s failed in %s", type(observer).__name__, hook)
