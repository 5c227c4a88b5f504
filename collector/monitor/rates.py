"""Rates per second from the collectors' cumulative counters, and the last minutes of them for the charts.

Every collector writes its counters since its start (`sinceStart`, `process.cpuSeconds`) with the time it wrote
them (`statsAt`, its own clock) about every second. A rate is the difference of two successive writes over the
difference of their `statsAt`: cumulative counters make a missed read cost nothing (the next difference covers
it), and one collector's clock is only ever compared with itself. A restart (another `startedAt`) or a counter
that went down starts the collector afresh. A collector whose counters have not moved on for `STALE_AFTER`
seconds of the monitor's clock counts for nothing in the totals (it is dead, or its loop is stuck).

Pure: the documents and the time come in, figures go out.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..ops import status
from ..sdk.redaction import clip

SERIES = ("runs", "newItems", "requests", "notModified", "errors", "rateLimited")
NOT_ERRORS = ("ok", "rateLimit")
HISTORY_SECONDS = 15 * 60.0  # what the charts hold
MAX_POINTS = 3600  # and never more points than this, however often the monitor refreshes
STALE_AFTER = 5.0  # seconds without a new write before a collector's rates stop counting
MAX_KINDS = 20  # error kinds followed per collector (a kind is any text a document holds)
MAX_LINES = 12  # collectors with a line of their own in the history, the live ones first (all count in the totals)


def number(value: Any) -> float:
    """A finite, non-negative number from a document field, else 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value) if math.isfinite(value) and 0 <= value <= 1e15 else 0.0


def counters(doc: dict[str, Any]) -> dict[str, float]:
    """The cumulative counters one collector document holds, by series (errors also by kind, as `error:<kind>`)."""
    since = doc.get("sinceStart")
    since = since if isinstance(since, dict) else {}
    runs = since.get("runs")
    runs = runs if isinstance(runs, dict) else {}
    by_status = {clip(k, 40): number(v) for k, v in list(runs.items())[:MAX_KINDS]}
    out = {
        "runs": sum(by_status.values()),
        "newItems": number(since.get("newItems")),
        "requests": number(since.get("requests")),
        "notModified": number(since.get("notModified")),
        "rateLimited": by_status.get("rateLimit", 0.0),
        "errors": sum(n for status, n in by_status.items() if status not in NOT_ERRORS),
    }
    out.update({f"error:{k}": n for k, n in by_status.items() if k not in NOT_ERRORS})
    process = doc.get("process")
    out["cpuSeconds"] = number(process.get("cpuSeconds")) if isinstance(process, dict) else 0.0
    return out


@dataclass
class Seen:
    """What the monitor last read of one collector."""

    started: Any
    at: datetime
    counters: dict[str, float]
    rates: dict[str, float] = field(default_factory=dict)
    written: float = 0.0  # the monitor's clock (seconds) when the collector last wrote them


@dataclass
class Rates:
    """Per collector, the rates between its last two writes; and the history of the points the charts draw."""

    seen: dict[str, Seen] = field(default_factory=dict)
    points: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=MAX_POINTS))

    def update(self, docs: list[dict[str, Any]], now: float) -> dict[str, Any]:
        """Take one read of the `collectors` documents at `now` (the monitor's Unix time); return the new point:
        {"t", "total": {series: per second}, "by": {instance: {series: per second}}, "kinds": {kind: per second},
        "cpu": {instance: percent}}."""
        present = set()
        for doc in docs:
            key, at = doc.get("_id"), doc.get("statsAt")
            if not isinstance(at, datetime):
                continue
            name = status.text(key)  # the collector's id as the page shows it (view.py): printable, cut
            present.add(name)
            self._follow(name, doc, at, now)
        for gone in set(self.seen) - present:
            del self.seen[gone]
        point = self._point(now)
        self.points.append(slim(point))
        while self.points and self.points[0]["t"] < now - HISTORY_SECONDS:
            self.points.popleft()
        return point

    def _follow(self, name: str, doc: dict[str, Any], at: datetime, now: float) -> None:
        current = counters(doc)
        started = doc.get("startedAt")
        before = self.seen.get(name)
        if before is None or before.started != started or at < before.at:
            self.seen[name] = Seen(started, at, current, written=now)
            return
        elapsed = (at - before.at).total_seconds()
        if elapsed <= 0:
            return  # not written again since the last read: the last rates stand (until STALE_AFTER)
        if any(current.get(k, 0.0) < v for k, v in before.counters.items()):
            self.seen[name] = Seen(started, at, current, written=now)  # counters went back: start afresh
            return
        rates = {k: (current[k] - before.counters.get(k, 0.0)) / elapsed for k in current}
        self.seen[name] = Seen(started, at, current, rates, written=now)

    def _point(self, now: float) -> dict[str, Any]:
        by: dict[str, dict[str, float]] = {}
        cpu: dict[str, float] = {}
        kinds: dict[str, float] = {}
        live_first = sorted(self.seen.items(), key=lambda item: (now - item[1].written > STALE_AFTER, item[0]))
        for name, seen in live_first:
            fresh = now - seen.written <= STALE_AFTER
            rates = seen.rates if fresh else {}
            by[name] = {s: round(rates.get(s, 0.0), 3) for s in SERIES}
            if fresh and "cpuSeconds" in rates:
                cpu[name] = round(100 * rates["cpuSeconds"], 1)
            for k, v in rates.items():
                if k.startswith("error:") and v > 0:
                    kinds[k[6:]] = kinds.get(k[6:], 0.0) + v
        total = {s: round(sum(r[s] for r in by.values()), 3) for s in SERIES}
        return {
            "t": round(now, 3),
            "total": total,
            "by": by,
            "kinds": dict(sorted(kinds.items())[:MAX_KINDS]),
            "cpu": cpu,
        }

    def history(self) -> list[dict[str, Any]]:
        return list(self.points)


def slim(point: dict[str, Any]) -> dict[str, Any]:
    """A point as the charts keep it: the totals, and the lines of at most MAX_LINES collectors (the live ones
    first, then by name), so the history stays small however many collector documents the database holds."""
    lines = dict(list(point["by"].items())[:MAX_LINES])
    return {"t": point["t"], "total": point["total"], "by": lines}
