"""Heartbeats: each running collector keeps one document in the `collectors` collection, keyed by its instance
id — mode, host, pid, version, when it started, when it last beat, networks in flight, and counters since start
and over the last minute. Written every HEARTBEAT_SECONDS by the daemon's `heartbeat` job (jobs.py), which runs
on the dispatch loop's thread like every database access (a stuck loop stops beating); removed on a clean exit;
a TTL index drops instances silent for a day. One whose heartbeat is older than 3 × HEARTBEAT_SECONDS is dead
(`collector status`).
"""

from __future__ import annotations

import os
import socket
import time
from collections import Counter, deque
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..engine.events import Observer, Saved
from ..sdk.redaction import clip
from ..sdk.timeutil import utcnow

if TYPE_CHECKING:  # pragma: no cover
    from ..engine import Report
    from ..engine.run import RunResult
    from ..engine.store import Store
    from ..settings import Settings

WINDOW = 60.0  # seconds of the "last minute" counters


def counters() -> dict[str, Any]:
    return {"runs": {}, "newItems": 0, "quotaSkips": 0, "lostLeases": 0, "saveFailures": 0}


class Heartbeat(Observer):
    def __init__(
        self,
        store: Store,
        instance_id: str,
        mode: str,
        every: float,
        version: str,
        clock: Callable[[], datetime] = utcnow,
    ):
        self.store, self.instance_id, self.mode, self.every, self.version = store, instance_id, mode, every, version
        self.clock = clock
        self.started = clock()
        self.total = counters()
        self.recent: deque[tuple[float, str, int, int]] = deque()  # (when, status, new items, skipped for quota)
        self.recent_failures: deque[tuple[float, int]] = deque()
        self.inflight = 0
        # what this collector claims (Collector.served): (only these or None for all, never these)
        self.served: Callable[[], tuple[Any, Any]] = lambda: (None, ())
        # the networks running now (Collector.running), at most `max_running()` of them (the runs it may hold)
        self.runs_now: Callable[[], dict] = dict
        self.jobs: Callable[[], list] = list  # the recurring jobs as Jobs.describe gives them
        self.max_running: Callable[[], int] = lambda: 4096

    def on_run(self, result: RunResult, saved: Saved) -> None:
        status = str(result.status)
        skipped_for_quota = int(status == "rateLimit" and not result.called)
        self.total["runs"][status] = self.total["runs"].get(status, 0) + 1
        self.total["newItems"] += saved.new_items
        self.total["quotaSkips"] += skipped_for_quota
        self.total["lostLeases"] += int(not saved.state_saved)
        self.recent.append((time.monotonic(), status, saved.new_items, skipped_for_quota))

    def on_pass(self, report: Report) -> None:
        self.total["saveFailures"] += report.save_failures
        if report.save_failures:
            self.recent_failures.append((time.monotonic(), report.save_failures))

    def on_settings(self, old: Settings, new: Settings) -> None:
        self.every = new.heartbeat_seconds  # the interval the document states (status judges liveness by it)

    def on_tick(self, inflight: int) -> None:
        self.inflight = inflight  # written by the next beat

    def last_minute(self) -> dict[str, Any]:
        cutoff = time.monotonic() - WINDOW
        while self.recent and self.recent[0][0] < cutoff:
            self.recent.popleft()
        while self.recent_failures and self.recent_failures[0][0] < cutoff:
            self.recent_failures.popleft()
        runs = Counter(status for _, status, _, _ in self.recent)
        return {
            "runs": dict(runs),
            "newItems": sum(n for _, _, n, _ in self.recent),
            "quotaSkips": sum(q for _, _, _, q in self.recent),
            "saveFailures": sum(n for _, n in self.recent_failures),
        }

    def document(self) -> dict[str, Any]:
        only, exclude = self.served()
        return {
            "mode": self.mode,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "version": self.version,
            "startedAt": self.started,
            "heartbeatAt": self.clock(),
            "inflight": self.inflight,
            "heartbeatSeconds": self.every,
            "services": {"only": sorted(only or ()), "exclude": sorted(exclude)},
            "jobs": self.jobs(),
            "running": [
                {"network": clip(network_id, 80), "service": clip(service, 40), "user": clip(user, 80), "since": since}
                for network_id, service, user, since in list(self.runs_now().values())[: self.max_running()]
            ],
            "sinceStart": self.total,
            "lastMinute": self.last_minute(),
        }

    def beat(self) -> None:
        self.store.beat(self.instance_id, self.document())

    def close(self) -> None:
        self.store.forget_instance(self.instance_id)
