"""Heartbeats: each running collector keeps one document in the `collectors` collection, keyed by its instance
id — mode, host, pid, version, when it started, when it last beat, networks in flight, and counters since start
and over the last minute. Written every HEARTBEAT_SECONDS by the daemon's `heartbeat` job (jobs.py), which runs
on the dispatch loop's thread like every database access (a stuck loop stops beating); removed on a clean exit;
a TTL index drops instances silent for a day. One whose heartbeat is older than 3 × HEARTBEAT_SECONDS is dead
(`collector status`).

The stats beat: every STATS_SECONDS the `stats` job writes the part that moves — `statsAt`, `statsSeconds`, networks
in flight and running, the counters since start (with the HTTP requests the runs made and how many were answered
304) and the process's resident memory and CPU time (procmetrics.usage) — with the same upsert; the monitor
differences the counters. A full heartbeat writes that part too.
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
from .procmetrics import usage

if TYPE_CHECKING:  # pragma: no cover
    from ..engine import Report
    from ..engine.run import RunResult
    from ..engine.store import Store
    from ..settings import Settings

WINDOW = 60.0  # seconds of the "last minute" counters


def counters() -> dict[str, Any]:
    return {
        "runs": {},
        "newItems": 0,
        "quotaSkips": 0,
        "lostLeases": 0,
        "saveFailures": 0,
        "requests": 0,  # HTTP requests the runs made
        "notModified": 0,  # of those, answered 304
    }


def not_modified(codes: tuple[tuple[str, int], ...]) -> int:
    """How many of a run's requests were answered 304 (RunResult.codes: (code, count) pairs)."""
    return sum(int(n) for code, n in codes if str(code) == "304")


def snapshot(total: dict[str, Any]) -> dict[str, Any]:
    """A copy of the counters as they are now (the database write must not see them change)."""
    return {**total, "runs": dict(total["runs"])}


class Heartbeat(Observer):
    def __init__(
        self,
        store: Store,
        instance_id: str,
        mode: str,
        every: float,
        version: str,
        clock: Callable[[], datetime] = utcnow,
        stats_every: float = 1.0,
    ):
        self.store, self.instance_id, self.mode, self.every, self.version = store, instance_id, mode, every, version
        self.clock = clock
        self.stats_every = stats_every  # STATS_SECONDS: the `stats` job's interval, stated in the document
        self.usage: Callable[[], tuple[int, float]] = usage  # (resident bytes, CPU seconds) of this process
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
        self.total["requests"] += result.requests
        self.total["notModified"] += not_modified(result.codes)
        self.recent.append((time.monotonic(), status, saved.new_items, skipped_for_quota))

    def on_pass(self, report: Report) -> None:
        self.total["saveFailures"] += report.save_failures
        if report.save_failures:
            self.recent_failures.append((time.monotonic(), report.save_failures))

    def on_settings(self, old: Settings, new: Settings) -> None:
        self.every = new.heartbeat_seconds  # the interval the document states (status judges liveness by it)
        self.stats_every = new.stats_seconds  # the `stats` job follows it too (Jobs.on_settings)

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

    def running(self) -> list[dict[str, Any]]:
        """The networks running now, at most as many as this collector may hold."""
        return [
            {"network": clip(network_id, 80), "service": clip(service, 40), "user": clip(user, 80), "since": since}
            for network_id, service, user, since in list(self.runs_now().values())[: self.max_running()]
        ]

    def stats(self, now: datetime | None = None) -> dict[str, Any]:
        """What the stats beat writes: the moving part of the document, as of `now` (default: the clock)."""
        rss_bytes, cpu_seconds = self.usage()
        return {
            "statsAt": self.clock() if now is None else now,
            "statsSeconds": self.stats_every,
            "inflight": self.inflight,
            "running": self.running(),
            "sinceStart": snapshot(self.total),
            "process": {"rssBytes": int(rss_bytes), "cpuSeconds": float(cpu_seconds)},
        }

    def document(self) -> dict[str, Any]:
        only, exclude = self.served()
        now = self.clock()
        return {
            "mode": self.mode,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "version": self.version,
            "startedAt": self.started,
            "heartbeatAt": now,
            "heartbeatSeconds": self.every,
            "services": {"only": sorted(only or ()), "exclude": sorted(exclude)},
            "jobs": self.jobs(),
            **self.stats(now),
            "lastMinute": self.last_minute(),
        }

    def beat(self) -> None:
        self.store.beat(self.instance_id, self.document())

    def beat_stats(self, now: datetime | None = None) -> None:
        """The stats beat: one upsert of the moving part (the `stats` job, every STATS_SECONDS)."""
        self.store.beat(self.instance_id, self.stats(now))

    def close(self) -> None:
        self.store.forget_instance(self.instance_id)
