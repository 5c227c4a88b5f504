"""Observers: cross-cutting reactions to runs and passes (the run log line, metrics, the systemd watchdog,
heartbeats), called by the engine after each save. Like dramatiq's middleware: every hook has a no-op default,
and an observer that raises is logged and never breaks a pass.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .collector import Report
    from .run import RunResult

log = logging.getLogger("collector.observers")


@dataclass(frozen=True)
class Saved:
    """How the save of one run went: new items stored, and whether the state write was accepted."""

    new_items: int
    state_saved: bool  # False: the lease was lost to another collector (items were kept)
    dropped: bool = False  # never saved: the database stayed away until the lease lapsed


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


class RunLog(Observer):
    """One log line per run."""

    log = logging.getLogger("collector.run")

    def on_run(self, result: RunResult, saved: Saved) -> None:
        network = result.network
        error = result.error
        level = logging.WARNING if error is not None and error.counts_as_error else logging.INFO
        message = "run service=%s user=%s mode=%s new_items=%d items=%d skipped=%d duration_ms=%.0f status=%s"
        args: list[Any] = [
            str(network.get("service"))[:40],
            str(network.get("user"))[:80],
            result.mode,
            saved.new_items,
            len(result.items),
            result.skipped,
            result.duration * 1000,
            result.status,
        ]
        if result.skip_reason:
            message += " skip_reason=%r"
            args.append(result.skip_reason)
        if error is not None:
            message += " error=%r"
            args.append(error.message)
        if saved.dropped:
            message += " saved=no"
        fields = {
            "service": args[0],
            "network": str(network.get("_id")),
            "user": args[1],
            "mode": result.mode,
            "status": str(result.status),
            "new_items": saved.new_items,
            "skipped": result.skipped,
            "duration_ms": round(result.duration * 1000),
            "requests": result.requests,
            "items": len(result.items),
            "saved": not saved.dropped,
            "error_kind": str(error.kind) if error is not None else None,
        }
        self.log.log(level, message, *args, extra={"run": fields})


class PassLog(Observer):
    """One log line per pass that ran networks."""

    log = logging.getLogger("collector.daemon")

    def on_pass(self, report: Report) -> None:
        if report.tasks:
            self.log.info(
                "pass %s: %d networks, %d new items, %s, %.1fs, skipped for quota %d, lost leases %d, save failures %d",
                report.mode,
                report.tasks,
                report.new_items,
                report.by_status,
                report.duration,
                report.requests_skipped,
                report.stale,
                report.save_failures,
            )
