"""The default observers of every collector: one log line per run (`collector.run`) and one per pass that ran
networks (`collector.daemon`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..sdk.redaction import shown
from .events import Observer, Report, Saved

if TYPE_CHECKING:  # pragma: no cover
    from .run import RunResult


class RunLog(Observer):
    """One log line per run."""

    log = logging.getLogger("collector.run")

    def on_run(self, result: RunResult, saved: Saved) -> None:
        network = result.network
        error = result.error
        status = str(result.status)
        level = logging.WARNING if error is not None and error.counts_as_error else logging.INFO
        message = "run service=%s user=%s mode=%s new_items=%d items=%d skipped=%d duration_ms=%.0f status=%s"
        args: list[Any] = [
            shown(network.get("service"), 40),
            shown(network.get("user"), 80),
            result.mode,
            saved.new_items,
            len(result.items),
            result.skipped,
            result.duration * 1000,
            status,
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
            "status": status,
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
        if report.runs:
            self.log.info(
                "pass %s: %d networks, %d new items, %s, %.1fs, skipped for quota %d, lost leases %d, save failures %d",
                report.mode,
                report.runs,
                report.new_items,
                report.by_status,
                report.duration,
                report.requests_skipped,
                report.stale,
                report.save_failures,
            )
